// Drive franz-kafka 0.7.5 through one named scenario against a Kafka 0.7 broker: its
// wire-level Client (requests, response parsing, compression) for scripted exchanges,
// and its application API (Kafka, Topic streams) for the `stream` scenario.
//
//   node franz.js SCENARIO HOST PORT
//
// Prints one JSON object per line: what the application sent and what it got back
// (payload digests after franz-kafka's own decompression), for the corpus truth files.
'use strict'

const crypto = require('crypto')
const Kafka = require('franz-kafka')
const Client = require('franz-kafka/client')({ info() {}, error() {} })

const [scenarioName, host, port] = process.argv.slice(2)
const COMPRESSION = { none: 0, gzip: 1, snappy: 2 }

function record(event) {
  process.stdout.write(JSON.stringify(event) + '\n')
}

function sha256(buffer) {
  return crypto.createHash('sha256').update(buffer).digest('hex')
}

function payload(topic, index, size) {
  const text = `${topic}#${index} `
  return Buffer.from(text.repeat(Math.ceil(size / text.length)).slice(0, size))
}

function topicOf(name, compression = 'none', maxFetchSize = 300 * 1024) {
  return {
    name,
    compression: COMPRESSION[compression],
    maxMessageSize: 1000000,
    maxFetchSize,
  }
}

function connect() {
  return new Promise((resolve, reject) => {
    const client = new Client(0, { host, port: Number(port) })
    client.once('connect', () => resolve(client))
    client.connection.once('error', reject)
  })
}

function closed(client) {
  return new Promise((resolve) => client.connection.once('close', resolve))
}

async function produce(client, topic, partition, payloads) {
  await new Promise((resolve, reject) =>
    client.write(topic, payloads, partition, (err) => (err ? reject(err) : resolve())),
  )
  record({
    event: 'produce',
    topic: topic.name,
    partition,
    compression: Object.keys(COMPRESSION)[topic.compression],
    messages: payloads.map((p) => ({ size: p.length, sha256: sha256(p) })),
  })
}

function unpack(message) {
  return new Promise((resolve) => message.unpack(resolve))
}

// One FETCH; returns the offset after the complete messages franz-kafka parsed.
async function fetch(client, topic, partition, offset) {
  const state = { id: partition, offset }
  const [err, parsed, messages] = await new Promise((resolve) =>
    client.fetch(topic, state, (...args) => resolve(args)),
  )
  const received = []
  for (const message of messages || []) {
    for (const data of await unpack(message)) {
      received.push({ size: data.length, sha256: sha256(data) })
    }
  }
  record({
    event: 'fetch',
    topic: topic.name,
    partition,
    offset,
    max_size: topic.maxFetchSize,
    error: err ? err.message : null,
    bytes_parsed: parsed || 0,
    messages: received,
  })
  return err ? offset : offset + parsed
}

// Fetch from `offset` until a fetch returns nothing new.
async function drain(client, topic, partition, offset = 0) {
  for (;;) {
    const next = await fetch(client, topic, partition, offset)
    if (next === offset) return offset
    offset = next
  }
}

async function offsets(client, topic, partition, time, maxCount) {
  const [err, , list] = await new Promise((resolve) =>
    client.offsets(topic, { id: partition }, time, maxCount, (...args) => resolve(args)),
  )
  record({
    event: 'offsets',
    topic: topic.name,
    partition,
    time,
    max_offsets: maxCount,
    error: err ? err.message : null,
    offsets: list || [],
  })
}

function batch(topic, first, count, size) {
  return Array.from({ length: count }, (_, i) => payload(topic.name, first + i, size))
}

const LATEST = -1
const EARLIEST = -2

const scenarios = {
  // Three produced batches, then a consumer reading them back from offset 0.
  async plain() {
    const client = await connect()
    const topic = topicOf('events')
    for (let b = 0; b < 3; b++) await produce(client, topic, 0, batch(topic, b * 5, 5, 60 + b * 40))
    await drain(client, topic, 0)
    client.end()
  },

  async gzip() {
    await compressed('gzip')
  },

  async snappy() {
    await compressed('snappy')
  },

  // Offsets of an empty partition, then latest / earliest / by time once it has data.
  async offsets() {
    const client = await connect()
    const topic = topicOf('ledger')
    await offsets(client, topic, 0, LATEST, 10)
    await offsets(client, topic, 0, EARLIEST, 10)
    await produce(client, topic, 0, batch(topic, 0, 4, 50))
    await produce(client, topic, 0, batch(topic, 4, 4, 50))
    await offsets(client, topic, 0, LATEST, 10)
    await offsets(client, topic, 0, LATEST, 1)
    await offsets(client, topic, 0, EARLIEST, 10)
    await offsets(client, topic, 0, Date.now() + 60000, 10)
    await offsets(client, topic, 0, 1000, 10)
    const latest = await drain(client, topic, 0)
    await fetch(client, topic, 0, latest)
    client.end()
  },

  // Small MAX_SIZE: every response stops inside a message; the consumer moves on by
  // what it could parse. The last fetch is smaller than one message (franz-kafka's
  // "message larger than buffer").
  async partial() {
    const client = await connect()
    const topic = topicOf('partial', 'none', 250)
    await produce(client, topic, 0, batch(topic, 0, 12, 90))
    await drain(client, topic, 0)
    await fetch(client, topicOf('partial', 'none', 40), 0, 0)
    client.end()
  },

  // The application API: a Topic stream producing in batches (queueTime / batchSize)
  // over two partitions while its consumer loop fetches both in turn, with backoff on
  // empty fetches and a MAX_SIZE that cuts batches. The client knows no partition or
  // offset here: it records what it wrote and what 'data' gave back.
  async stream() {
    const total = 40
    const kafka = new Kafka({
      brokers: [{ id: 0, host, port: Number(port) }],
      queueTime: 100,
      batchSize: 8,
      maxFetchDelay: 400,
      maxFetchSize: 500,
    })
    await new Promise((resolve) => kafka.connect(resolve))
    const topic = kafka.topic('stream', { partitions: { consume: ['0-0:0', '0-1:0'], produce: ['0:2'] } })
    let received = 0
    const all = new Promise((resolve) =>
      topic.on('data', (data) => {
        record({ event: 'data', topic: 'stream', size: data.length, sha256: sha256(data) })
        if (++received === total) resolve()
      }),
    )
    topic.on('error', (err) => record({ event: 'error', topic: 'stream', error: err.message }))
    topic.resume()
    for (let i = 0; i < total; i++) {
      const data = payload('stream', i, 60 + (i % 7) * 10)
      topic.write(data)
      record({ event: 'write', topic: 'stream', size: data.length, sha256: sha256(data) })
      await new Promise((resolve) => setTimeout(resolve, 15))
    }
    await all
    kafka.close()
    setTimeout(() => process.exit(0), 200)
  },

  // FETCH errors 0.7 answers with a code, then the requests 0.7 answers by closing.
  async errors() {
    let client = await connect()
    const topic = topicOf('orders')
    await produce(client, topic, 0, batch(topic, 0, 3, 40))
    await fetch(client, topic, 0, 1000000)
    await fetch(client, topic, 5, 0)
    await fetch(client, topicOf('nobody-wrote-here'), 0, 0)
    let gone = closed(client)
    await produce(client, topic, 9, batch(topic, 3, 2, 40))
    await gone
    record({ event: 'closed_by_broker', after: 'produce to partition 9' })
    client = await connect()
    gone = closed(client)
    await offsets(client, topic, 9, LATEST, 1)
    await gone
    record({ event: 'closed_by_broker', after: 'offsets on partition 9' })
    client = await connect()
    await drain(client, topic, 0)
    client.end()
  },
}

async function compressed(compression) {
  const client = await connect()
  const topic = topicOf(`${compression}-events`, compression)
  await produce(client, topic, 0, batch(topic, 0, 10, 120))
  await produce(client, topic, 0, batch(topic, 10, 3, 700))
  await produce(client, topic, 1, batch(topic, 13, 4, 80))
  await drain(client, topic, 0)
  await drain(client, topic, 1)
  client.end()
}

scenarios[scenarioName]().then(
  () => {},
  (err) => {
    console.error(err)
    process.exit(1)
  },
)
