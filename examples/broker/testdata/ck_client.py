"""A confluent_kafka (librdkafka) client the broker's tests drive.

    ck_client.py produce BROKER TOPIC N CODEC [PAD]
                                                 produce values m-0..m-(N-1) (each followed by
                                                 PAD dots: librdkafka sends a batch that does
                                                 not shrink uncompressed)
    ck_client.py consume BROKER TOPIC GROUP N   consume N records in group GROUP, commit
                                                 the last one synchronously, close; prints
                                                 one JSON line {"values": [...], "committed": C}
    ck_client.py produce-idem BROKER TOPIC N1 N2
                                                 one idempotent producer (enable.idempotence) sends
                                                 values m-0..m-(N1-1), flushes, prints
                                                 {"produced": N1}, waits for a line on stdin (the
                                                 test restarts the broker meanwhile), sends
                                                 m-N1..m-(N1+N2-1), flushes, prints {"produced": N1+N2}
    ck_client.py lag BROKER TOPIC GROUP         prints {"committed": C, "low": L, "high": H, "lag": H-C}
                                                 for partition 0 (committed -1001 = none)
    ck_client.py txn BROKER TOPIC TXNID N       a transactional producer (transactional.id TXNID):
                                                 init_transactions; commits c1-0..c1-(N-1), aborts
                                                 a-0..a-(N-1), commits c2-0..c2-(N-1), all to
                                                 partition 0; then a plain producer writes "end";
                                                 a read_committed consumer reads partition 0 from
                                                 the start up to "end"; prints
                                                 {"values": [...], "uncommitted": [...]} (the second
                                                 list from a read_uncommitted consumer)

Every wait is bounded (DEADLINE seconds); on failure it exits non-zero with the reason on stderr.
"""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

DEADLINE = 60


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def produce(broker, topic, n, codec, pad):
    p = Producer({"bootstrap.servers": broker, "compression.type": codec, "linger.ms": 20})
    errors = []

    def report(err, _msg):
        if err is not None:
            errors.append(str(err))

    for i in range(n):
        p.produce(topic, value=("m-%d" % i + "." * pad).encode(), key=("k%d" % i).encode(), on_delivery=report)
    left = p.flush(DEADLINE)
    if left or errors:
        fail("produce: %d undelivered, errors %s" % (left, errors))
    print(json.dumps({"produced": n}))


def produce_idem(broker, topic, n1, n2):
    p = Producer({
        "bootstrap.servers": broker,
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.num.messages": 7,
        "max.in.flight.requests.per.connection": 1,
        "reconnect.backoff.ms": 10,
        "reconnect.backoff.max.ms": 200,
    })
    errors = []

    def report(err, _msg):
        if err is not None:
            errors.append(str(err))

    def send(lo, hi):
        for i in range(lo, hi):
            p.produce(topic, value=("m-%d" % i).encode(), key=("k%d" % i).encode(), partition=0, on_delivery=report)
        left = p.flush(DEADLINE)
        if left or errors:
            fail("produce-idem: %d undelivered, errors %s" % (left, errors))
        print(json.dumps({"produced": hi}), flush=True)

    send(0, n1)
    if not sys.stdin.readline():
        fail("produce-idem: stdin closed before the second phase")
    send(n1, n1 + n2)


def consumer(broker, group):
    return Consumer({
        "bootstrap.servers": broker,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
    })


def consume(broker, topic, group, n):
    c = consumer(broker, group)
    c.subscribe([topic])
    values, last = [], None
    end = time.monotonic() + DEADLINE
    while len(values) < n:
        if time.monotonic() > end:
            fail("consume: %d of %d records before the deadline: %s" % (len(values), n, values))
        msg = c.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            fail("consume: %s" % msg.error())
        values.append(msg.value().decode())
        last = msg
    parts = c.commit(message=last, asynchronous=False)
    committed = [tp.offset for tp in parts if tp.partition == last.partition()]
    for tp in parts:
        if tp.error is not None:
            fail("commit: %s" % tp.error)
    c.close()
    print(json.dumps({"values": values, "committed": committed[0]}))


def lag(broker, topic, group):
    c = consumer(broker, group)
    tp = TopicPartition(topic, 0)
    committed = c.committed([tp], timeout=DEADLINE)[0].offset
    low, high = c.get_watermark_offsets(tp, timeout=DEADLINE)
    c.close()
    print(json.dumps({"committed": committed, "low": low, "high": high, "lag": high - committed}))


def transactions(broker, topic, txn_id, n):
    p = Producer({
        "bootstrap.servers": broker,
        "transactional.id": txn_id,
        "linger.ms": 5,
        "transaction.timeout.ms": 60000,
    })
    p.init_transactions(DEADLINE)
    for prefix, commit in (("c1", True), ("a", False), ("c2", True)):
        p.begin_transaction()
        for i in range(n):
            p.produce(topic, value=("%s-%d" % (prefix, i)).encode(), partition=0)
        if commit:
            p.commit_transaction(DEADLINE)
        else:
            p.flush(DEADLINE)  # the records reach the log before the abort
            p.abort_transaction(DEADLINE)
    plain = Producer({"bootstrap.servers": broker})
    plain.produce(topic, value=b"end", partition=0)
    if plain.flush(DEADLINE):
        fail("txn: the end record was not delivered")

    def read(isolation):
        c = Consumer({
            "bootstrap.servers": broker,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        })
        c.assign([TopicPartition(topic, 0, 0)])
        values = []
        end = time.monotonic() + DEADLINE
        while True:
            if time.monotonic() > end:
                fail("txn: %s consumer got %s before the deadline" % (isolation, values))
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                fail("txn: %s consumer: %s" % (isolation, msg.error()))
            v = msg.value().decode()
            if v == "end":
                break
            values.append(v)
        c.close()
        return values

    print(json.dumps({"values": read("read_committed"), "uncommitted": read("read_uncommitted")}))


def main(argv):
    try:
        if argv[1] == "produce":
            produce(argv[2], argv[3], int(argv[4]), argv[5], int(argv[6]) if len(argv) > 6 else 0)
        elif argv[1] == "produce-idem":
            produce_idem(argv[2], argv[3], int(argv[4]), int(argv[5]))
        elif argv[1] == "consume":
            consume(argv[2], argv[3], argv[4], int(argv[5]))
        elif argv[1] == "lag":
            lag(argv[2], argv[3], argv[4])
        elif argv[1] == "txn":
            transactions(argv[2], argv[3], argv[4], int(argv[5]))
        else:
            fail("unknown command %s" % argv[1])
    except KafkaException as e:
        fail("%s: %s" % (argv[1], e))


if __name__ == "__main__":
    main(sys.argv)
