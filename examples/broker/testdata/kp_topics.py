"""kafka-python's KafkaAdminClient against the broker: create topics (with a
configuration, validate_only, and the refusals), list and describe them,
delete them. Prints one JSON object. Usage: kp_topics.py BOOTSTRAP"""
import json
import sys

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import KafkaError

bootstrap = sys.argv[1]
out = {}
admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin", request_timeout_ms=20000)


def attempt(name, fn):
    """Runs fn and records the error class kafka-python raised, or NoError."""
    try:
        fn()
        out[name] = "NoError"
    except KafkaError as e:
        out[name] = type(e).__name__


attempt("create", lambda: admin.create_topics([
    NewTopic("kp-orders", 3, 1),
    NewTopic("kp-compacted", 1, 1, topic_configs={"cleanup.policy": "compact"}),
]))
attempt("create_again", lambda: admin.create_topics([NewTopic("kp-orders", 3, 1)]))
attempt("create_rf3", lambda: admin.create_topics([NewTopic("kp-rf3", 1, 3)]))
attempt("create_zero", lambda: admin.create_topics([NewTopic("kp-zero", 0, 1)]))
attempt("create_bad_name", lambda: admin.create_topics([NewTopic("kp/bad", 1, 1)]))
attempt("create_bad_config", lambda: admin.create_topics(
    [NewTopic("kp-bad-config", 1, 1, topic_configs={"segment.bytes": "1024"})]))
attempt("validate_only", lambda: admin.create_topics([NewTopic("kp-checked", 2, 1)], validate_only=True))
out["listed"] = sorted(t for t in admin.list_topics() if not t.startswith("__"))
out["described"] = {t["topic"]: {"error": t["error_code"], "partitions": sorted(
    [p["partition"], p["leader"], p["replicas"], p["isr"]] for p in t["partitions"])}
    for t in admin.describe_topics(["kp-orders", "kp-compacted"])}
attempt("delete", lambda: admin.delete_topics(["kp-orders"]))
attempt("delete_again", lambda: admin.delete_topics(["kp-orders"]))
out["listed_after"] = sorted(t for t in admin.list_topics() if not t.startswith("__"))
admin.close()
print(json.dumps(out))
