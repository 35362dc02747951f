package pwcap.realbroker;

import java.util.Map;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.schema.GenericRecord;

/**
 * An Avro schema: the producer registers it with its PRODUCER command, a typed consumer
 * subscribes with it, and an AUTO_CONSUME consumer fetches it from the broker (GET_SCHEMA).
 */
final class SchemaScenario {
    /** The record type on the wire. */
    public static final class Reading {
        public String sensor;
        public double value;
        public long seq;

        public Reading() {
        }

        Reading(String sensor, double value, long seq) {
            this.sensor = sensor;
            this.value = value;
            this.seq = seq;
        }
    }

    private final Scenarios s;

    SchemaScenario(Scenarios s) {
        this.s = s;
    }

    void run() throws Exception {
        String topic = s.topic("avro");
        Schema<Reading> schema = Schema.AVRO(Reading.class);
        try (PulsarClient client = s.client()) {
            Consumer<Reading> typed = client.newConsumer(schema).topic(topic)
                    .subscriptionName("avro-sub").consumerName("avro-consumer")
                    .subscriptionType(SubscriptionType.Exclusive)
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
            Producer<Reading> producer = client.newProducer(schema).topic(topic)
                    .producerName("avro-producer").enableBatching(false).create();
            for (int i = 0; i < 8; i++) {
                Reading reading = new Reading("sensor-" + (i % 3), i * 1.5, i);
                Map<String, String> props = Scenarios.properties("schema", i);
                long sendTime = Record.nowMicros();
                MessageId id = producer.newMessage().sequenceId(i).key("sensor-" + (i % 3))
                        .value(reading).properties(props).send();
                s.record.sent(producer, i, schema.encode(reading), "sensor-" + (i % 3), props, id,
                        sendTime, Map.of());
            }
            for (int i = 0; i < 8; i++) {
                Message<Reading> message = s.receive(typed);
                if (message.getValue().seq != i) {
                    throw new IllegalStateException("decoded " + message.getValue().seq);
                }
                s.ack(typed, message);
            }
            Consumer<GenericRecord> generic = client.newConsumer(Schema.AUTO_CONSUME()).topic(topic)
                    .subscriptionName("avro-auto-sub").consumerName("avro-auto-consumer")
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
            for (int i = 0; i < 8; i++) {
                Message<GenericRecord> message = s.receive(generic);
                if (((Number) message.getValue().getField("seq")).longValue() != i) {
                    throw new IllegalStateException("auto-consumed " + message.getValue());
                }
                s.ack(generic, message);
            }
            Scenarios.settle();
            producer.close();
            typed.close();
            generic.close();
        }
    }
}
