"""kafka-python's KafkaAdminClient against the broker: describe, list and
delete consumer groups while a KafkaConsumer of the group is a member and
after it left. Prints one JSON object. Usage: kp_admin.py BOOTSTRAP TOPIC GROUP"""
import json
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

bootstrap, topic, group = sys.argv[1:4]
out = {}


def describe(admin):
    d = admin.describe_consumer_groups([group])[0]
    return {"state": d.state, "protocol_type": d.protocol_type, "protocol": d.protocol,
            "members": [{"client_id": m.client_id, "client_host": m.client_host,
                         "assigned": sorted(p for tps in m.member_assignment.assignment for p in tps[1])
                         if m.member_assignment else []} for m in d.members]}


admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin", request_timeout_ms=20000)
consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id="kp-consumer",
                         auto_offset_reset="earliest", enable_auto_commit=False)
deadline = time.time() + 30
while not consumer.assignment() and time.time() < deadline:
    consumer.poll(timeout_ms=500)
consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(3, "")})
out["stable"] = describe(admin)
out["listed"] = sorted([g, t] for g, t in admin.list_consumer_groups())
out["offsets"] = {str(tp.partition): om.offset for tp, om in admin.list_consumer_group_offsets(group).items()}
try:
    res = admin.delete_consumer_groups([group])
    out["delete_with_member"] = [e.__name__ for _, e in res]
except KafkaError as e:
    out["delete_with_member"] = [type(e).__name__]
consumer.close()
out["empty"] = describe(admin)
out["delete"] = [e.__name__ for _, e in admin.delete_consumer_groups([group])]
out["listed_after"] = sorted([g, t] for g, t in admin.list_consumer_groups())
out["offsets_after"] = {str(tp.partition): om.offset for tp, om in admin.list_consumer_group_offsets(group).items()}
admin.close()
print(json.dumps(out))
