package pwcap.realbroker;

import com.google.gson.GsonBuilder;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.Producer;

/**
 * What the client did, in the same shape as the Python corpus record (tests/corpus/record.py):
 * every message sent with the id the broker assigned, every message received with its
 * redelivery count and what the application did with it, and every acknowledgement.
 * Thread-safe: listeners and async callbacks add to it.
 */
final class Record {
    private final List<Map<String, Object>> sent = new ArrayList<>();
    private final List<Map<String, Object>> received = new ArrayList<>();
    private final List<Map<String, Object>> acks = new ArrayList<>();
    private final List<Map<String, Object>> events = new ArrayList<>();

    static long nowMicros() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    static String sha256(byte[] data) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** [ledger, entry, partition, batch_index]; a chunked message's id is its last chunk's. */
    static List<Long> idOf(MessageId id) {
        MessageIdAdv adv = (MessageIdAdv) id;
        return List.of(adv.getLedgerId(), adv.getEntryId(),
                (long) adv.getPartitionIndex(), (long) adv.getBatchIndex());
    }

    synchronized void sent(Producer<?> producer, long sequenceId, byte[] payload, String key,
                           Map<String, String> properties, MessageId id, long sendTimeUs,
                           Map<String, Object> extra) {
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("topic", producer.getTopic());
        row.put("producer_name", producer.getProducerName());
        row.put("sequence_id", sequenceId);
        row.put("key", key);
        row.put("properties", new TreeMap<>(properties));
        row.put("size", payload.length);
        row.put("sha256", sha256(payload));
        row.put("message_id", idOf(id));
        putChunkIds(row, id);
        row.put("send_time_us", sendTimeUs);
        row.putAll(extra);
        sent.add(row);
    }

    synchronized void received(Consumer<?> consumer, Message<?> message, String action) {
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("topic", message.getTopicName());
        row.put("subscription", consumer.getSubscription());
        row.put("consumer_name", consumer.getConsumerName());
        row.put("producer_name", message.getProducerName());
        row.put("sequence_id", message.getSequenceId());
        row.put("message_id", idOf(message.getMessageId()));
        putChunkIds(row, message.getMessageId());
        row.put("redelivery_count", message.getRedeliveryCount());
        row.put("key", message.hasKey() ? message.getKey() : null);
        row.put("properties", new TreeMap<>(message.getProperties()));
        row.put("publish_time_ms", message.getPublishTime());
        if (message.hasBrokerPublishTime()) {
            row.put("broker_publish_time_ms", message.getBrokerPublishTime().get());
        }
        if (message.hasIndex()) {
            row.put("index", message.getIndex().get());
        }
        row.put("size", message.getData().length);
        row.put("sha256", sha256(message.getData()));
        row.put("receive_time_us", nowMicros());
        row.put("action", action);
        received.add(row);
    }

    synchronized void ack(Consumer<?> consumer, MessageId id, String type, String txn) {
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("t_us", nowMicros());
        row.put("topic", consumer.getTopic());
        row.put("subscription", consumer.getSubscription());
        row.put("consumer_name", consumer.getConsumerName());
        row.put("message_id", idOf(id));
        row.put("type", type);
        if (txn != null) {
            row.put("txn", txn);
        }
        acks.add(row);
    }

    /** A step the scenario took that the capture should show (a join, an unload, a commit). */
    synchronized void event(String what, Map<String, Object> details) {
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("t_us", nowMicros());
        row.put("event", what);
        row.putAll(details);
        events.add(row);
    }

    private static void putChunkIds(Map<String, Object> row, MessageId id) {
        MessageIdAdv first = ((MessageIdAdv) id).getFirstChunkMessageId();
        if (first != null) {
            row.put("first_chunk_message_id", idOf(first));
        }
    }

    synchronized void write(Path path, Map<String, Object> header) throws IOException {
        Map<String, Object> out = new LinkedHashMap<>(header);
        out.put("sent", sent);
        out.put("received", received);
        out.put("acks", acks);
        out.put("events", events);
        String json = new GsonBuilder().serializeNulls().setPrettyPrinting().create().toJson(out);
        Files.writeString(path, json + "\n", StandardCharsets.UTF_8);
    }
}
