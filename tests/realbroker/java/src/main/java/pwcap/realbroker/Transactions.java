package pwcap.realbroker;

import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;

/**
 * Consume-transform-produce in transactions: each transaction acks three input messages and
 * produces to the output topic; the first commits, the second aborts (its messages are never
 * delivered and its acks are undone, so the broker redelivers the inputs, acked plainly).
 */
final class Transactions {
    private final Scenarios s;

    Transactions(Scenarios s) {
        this.s = s;
    }

    void run() throws Exception {
        String input = s.topic("txn-in");
        String output = s.topic("txn-out");
        try (PulsarClient client = s.client(true)) {
            Consumer<byte[]> in = s.consumer(client, input, "txn-in-sub", "txn-in-consumer",
                    SubscriptionType.Shared).subscribe();
            Consumer<byte[]> out = s.consumer(client, output, "txn-out-sub", "txn-out-consumer",
                    SubscriptionType.Exclusive).subscribe();
            Producer<byte[]> source = client.newProducer().topic(input)
                    .producerName("txn-source").enableBatching(false).create();
            Producer<byte[]> sink = client.newProducer().topic(output).producerName("txn-sink")
                    .enableBatching(false).sendTimeout(0, TimeUnit.SECONDS).create();
            for (int i = 0; i < 6; i++) {
                s.send(source, i, Scenarios.payload(i, 70), null, Scenarios.properties("txn-in", i));
            }
            int produced = 0;
            for (String outcome : new String[] {"commit", "abort"}) {
                Transaction txn = client.newTransaction()
                        .withTransactionTimeout(1, TimeUnit.MINUTES).build().get();
                String txnId = txn.getTxnID().toString();
                s.record.event("txn_open", Map.of("txn", txnId));
                for (int i = 0; i < 3; i++, produced++) {
                    Message<byte[]> message = s.receive(in);
                    in.acknowledgeAsync(message.getMessageId(), txn).get();
                    s.record.received(in, message, "ack");
                    s.record.ack(in, message.getMessageId(), "individual", txnId);
                    byte[] payload = Scenarios.payload(100 + produced, 70);
                    Map<String, String> props = Scenarios.properties("txn-out", produced);
                    long sendTime = Record.nowMicros();
                    MessageId id = sink.newMessage(txn).sequenceId(produced).value(payload)
                            .properties(props).send();
                    s.record.sent(sink, produced, payload, null, props, id, sendTime,
                            Map.of("txn", txnId, "outcome", outcome));
                }
                if (outcome.equals("commit")) {
                    txn.commit().get();
                } else {
                    txn.abort().get();
                }
                s.record.event("txn_" + outcome, Map.of("txn", txnId));
            }
            s.receiveAndAck(out, 3);
            s.receiveAndAck(in, 3);  // the aborted acks are undone: the broker redelivers
            Scenarios.settle();
            source.close();
            sink.close();
            in.close();
            out.close();
        }
    }
}
