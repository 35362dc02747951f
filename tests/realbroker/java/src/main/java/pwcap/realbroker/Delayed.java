package pwcap.realbroker;

import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionType;

/**
 * Delayed delivery: messages that carry deliver_at_time two seconds ahead, interleaved with
 * ordinary ones, on a Shared subscription (the only kind the broker delays for).
 */
final class Delayed {
    private final Scenarios s;

    Delayed(Scenarios s) {
        this.s = s;
    }

    void run() throws Exception {
        String topic = s.topic("delayed");
        try (PulsarClient client = s.client()) {
            Consumer<byte[]> consumer = s.consumer(client, topic, "delayed-sub", "delayed-consumer",
                    SubscriptionType.Shared).subscribe();
            Producer<byte[]> producer = client.newProducer().topic(topic)
                    .producerName("delayed-producer").enableBatching(false).create();
            for (int i = 0; i < 10; i++) {
                byte[] payload = Scenarios.payload(i, 90);
                Map<String, String> props = Scenarios.properties("delayed", i);
                var builder = producer.newMessage().sequenceId(i).value(payload).properties(props);
                if (i % 2 == 0) {
                    builder.deliverAfter(2, TimeUnit.SECONDS);
                }
                long sendTime = Record.nowMicros();
                MessageId id = builder.send();
                s.record.sent(producer, i, payload, null, props, id, sendTime,
                        Map.of("delayed", i % 2 == 0));
            }
            s.receiveAndAck(consumer, 10);
            Scenarios.settle();
            producer.close();
            consumer.close();
        }
    }
}
