package pwcap.realbroker;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionType;

/**
 * Broker entry metadata (run on a broker with the timestamp and index interceptors, exposed
 * to clients): batched and single messages whose deliveries carry the broker's publish time
 * and the entry's index.
 */
final class EntryMetadata {
    private final Scenarios s;

    EntryMetadata(Scenarios s) {
        this.s = s;
    }

    void run() throws Exception {
        String topic = s.topic("entry-meta");
        try (PulsarClient client = s.client()) {
            Consumer<byte[]> consumer = s.consumer(client, topic, "entry-meta-sub",
                    "entry-meta-consumer", SubscriptionType.Exclusive).subscribe();
            Producer<byte[]> batched = client.newProducer().topic(topic)
                    .producerName("entry-meta-batched").enableBatching(true).batchingMaxMessages(5)
                    .batchingMaxPublishDelay(200, TimeUnit.MILLISECONDS).create();
            Producer<byte[]> single = client.newProducer().topic(topic)
                    .producerName("entry-meta-single").enableBatching(false).create();
            List<CompletableFuture<MessageId>> pending = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                pending.add(s.sendAsync(batched, i, Scenarios.payload(i, 70), "key-" + (i % 2),
                        Scenarios.properties("entry_metadata", i)));
            }
            CompletableFuture.allOf(pending.toArray(new CompletableFuture[0])).get();
            for (int i = 0; i < 5; i++) {
                s.send(single, i, Scenarios.payload(50 + i, 70), null,
                        Scenarios.properties("entry_metadata", 50 + i));
            }
            s.receiveAndAck(consumer, 15);
            Scenarios.settle();
            batched.close();
            single.close();
            consumer.close();
        }
    }
}
