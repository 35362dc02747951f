"""The sample corpus: real captures of the official Pulsar client talking to the test broker,
each with a truth file derived from the broker's frame journal and the client's own record."""
