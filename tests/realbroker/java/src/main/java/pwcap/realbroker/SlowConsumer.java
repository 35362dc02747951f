package pwcap.realbroker;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionType;

/**
 * A consumer with a ten-message receiver queue that takes 100 ms per message while sixty
 * are waiting: the broker spends its permits at once and the consumer sits at zero permits
 * until it has processed half its queue and sends the next FLOW.
 */
final class SlowConsumer {
    private final Scenarios s;

    SlowConsumer(Scenarios s) {
        this.s = s;
    }

    void run() throws Exception {
        String topic = s.topic("slow");
        try (PulsarClient client = s.client()) {
            Consumer<byte[]> consumer = s.consumer(client, topic, "slow-sub", "slow-consumer",
                    SubscriptionType.Shared).receiverQueueSize(10).subscribe();
            Producer<byte[]> producer = client.newProducer().topic(topic)
                    .producerName("slow-producer").enableBatching(false).create();
            for (int i = 0; i < 60; i++) {
                s.send(producer, i, Scenarios.payload(i, 120), null, Scenarios.properties("slow", i));
            }
            for (int i = 0; i < 60; i++) {
                Message<byte[]> message = s.receive(consumer);
                Thread.sleep(100);
                s.ack(consumer, message);
            }
            Scenarios.settle();
            producer.close();
            consumer.close();
        }
    }
}
