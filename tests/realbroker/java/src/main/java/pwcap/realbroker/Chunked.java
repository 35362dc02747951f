package pwcap.realbroker;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionType;

/** Chunking: three 70 kB messages cut into 20 kB chunks, between two small ones. */
final class Chunked {
    private final Scenarios s;

    Chunked(Scenarios s) {
        this.s = s;
    }

    void run() throws Exception {
        String topic = s.topic("chunked");
        try (PulsarClient client = s.client()) {
            Consumer<byte[]> consumer = s.consumer(client, topic, "chunked-sub", "chunked-consumer",
                    SubscriptionType.Exclusive).subscribe();
            Producer<byte[]> producer = client.newProducer().topic(topic)
                    .producerName("chunked-producer").enableBatching(false).enableChunking(true)
                    .chunkMaxMessageSize(20_000).create();
            for (int i = 0; i < 5; i++) {
                int size = (i == 0 || i == 4) ? 300 : 70_000;
                s.send(producer, i, Scenarios.payload(i, size), "key-" + i,
                        Scenarios.properties("chunked", i));
            }
            s.receiveAndAck(consumer, 5);
            Scenarios.settle();
            producer.close();
            consumer.close();
        }
    }
}
