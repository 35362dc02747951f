package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// Record is what the client did, in the shape of the Python corpus record
// (tests/corpus/record.py): every message sent with the id the broker assigned, every
// message received with its redelivery count and what the application did with it, and
// every acknowledgement. Safe for concurrent use.
type Record struct {
	mu       sync.Mutex
	Sent     []map[string]any `json:"sent"`
	Received []map[string]any `json:"received"`
	Acks     []map[string]any `json:"acks"`
	Events   []map[string]any `json:"events"`
}

func nowMicros() int64 { return time.Now().UnixMicro() }

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// idOf is [ledger, entry, partition, batch_index]; a chunked message's is its last chunk's.
// The Go client numbers a message outside a batch 0, as the first of a batch of one: the
// record's batch_size (1 then) tells the two apart where the wire does.
func idOf(id pulsar.MessageID) []int64 {
	return []int64{id.LedgerID(), id.EntryID(), int64(id.PartitionIdx()), int64(id.BatchIdx())}
}

func (r *Record) sent(producer pulsar.Producer, seq int64, msg *pulsar.ProducerMessage,
	id pulsar.MessageID, sendTime int64, extra map[string]any) {
	row := map[string]any{
		"topic":         producer.Topic(),
		"producer_name": producer.Name(),
		"sequence_id":   seq,
		"key":           nullable(msg.Key),
		"properties":    msg.Properties,
		"size":          len(msg.Payload),
		"sha256":        digest(msg.Payload),
		"message_id":    idOf(id),
		"batch_size":    id.BatchSize(),
		"send_time_us":  sendTime,
	}
	for k, v := range extra {
		row[k] = v
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Sent = append(r.Sent, row)
}

func (r *Record) received(consumer pulsar.Consumer, name string, msg pulsar.Message, action string) {
	row := map[string]any{
		"topic":            msg.Topic(),
		"subscription":     consumer.Subscription(),
		"consumer_name":    name,
		"producer_name":    msg.ProducerName(),
		"message_id":       idOf(msg.ID()),
		"batch_size":       msg.ID().BatchSize(),
		"redelivery_count": msg.RedeliveryCount(),
		"key":              nullable(msg.Key()),
		"properties":       msg.Properties(),
		"publish_time_ms":  msg.PublishTime().UnixMilli(),
		"size":             len(msg.Payload()),
		"sha256":           digest(msg.Payload()),
		"receive_time_us":  nowMicros(),
		"action":           action,
	}
	if t := msg.BrokerPublishTime(); t != nil {
		row["broker_publish_time_ms"] = t.UnixMilli()
	}
	if index := msg.Index(); index != nil {
		row["index"] = *index
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Received = append(r.Received, row)
}

func (r *Record) ack(consumer pulsar.Consumer, name string, msg pulsar.Message, txn string) {
	row := map[string]any{
		"t_us":          nowMicros(),
		"topic":         msg.Topic(),
		"subscription":  consumer.Subscription(),
		"consumer_name": name,
		"message_id":    idOf(msg.ID()),
		"type":          "individual",
	}
	if txn != "" {
		row["txn"] = txn
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Acks = append(r.Acks, row)
}

// event notes a step the capture should show (a join, a leave, a commit).
func (r *Record) event(what string, details map[string]any) {
	row := map[string]any{"t_us": nowMicros(), "event": what}
	for k, v := range details {
		row[k] = v
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Events = append(r.Events, row)
}

func (r *Record) write(path string, header map[string]any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]any{"sent": r.Sent, "received": r.Received, "acks": r.Acks, "events": r.Events}
	for k, v := range header {
		out[k] = v
	}
	data, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
