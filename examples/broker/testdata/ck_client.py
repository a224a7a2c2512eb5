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
        else:
            fail("unknown command %s" % argv[1])
    except KafkaException as e:
        fail("%s: %s" % (argv[1], e))


if __name__ == "__main__":
    main(sys.argv)
