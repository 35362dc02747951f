"""Kafka 0.7 test broker, real-client scenarios and the sample captures they make."""
