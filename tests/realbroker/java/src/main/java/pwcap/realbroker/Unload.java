package pwcap.realbroker;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionType;

/**
 * A topic unloaded by the admin API while a producer and a consumer are connected: the
 * broker closes both (CLOSE_PRODUCER, CLOSE_CONSUMER), the client looks the topic up again
 * and re-creates them on the same connection, and the traffic carries on.
 */
final class Unload {
    private final Scenarios s;

    Unload(Scenarios s) {
        this.s = s;
    }

    void run() throws Exception {
        String topic = s.topic("unload");
        try (PulsarClient client = s.client()) {
            Consumer<byte[]> consumer = s.consumer(client, topic, "unload-sub", "unload-consumer",
                    SubscriptionType.Failover).subscribe();
            Producer<byte[]> producer = client.newProducer().topic(topic)
                    .producerName("unload-producer").enableBatching(false).create();
            for (int i = 0; i < 10; i++) {
                s.send(producer, i, Scenarios.payload(i, 60), "key-" + (i % 2),
                        Scenarios.properties("unload", i));
            }
            s.receiveAndAck(consumer, 10);
            Scenarios.settle();
            s.unload(topic);
            Thread.sleep(3000);  // reconnection back-off starts at 100 ms
            for (int i = 10; i < 20; i++) {
                s.send(producer, i, Scenarios.payload(i, 60), "key-" + (i % 2),
                        Scenarios.properties("unload", i));
            }
            s.receiveAndAck(consumer, 10);
            Scenarios.settle();
            producer.close();
            consumer.close();
        }
    }
}
