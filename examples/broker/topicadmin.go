package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/compaction"
)

// maxCreatePartitions bounds the partition count of a topic CreateTopics
// makes (each partition costs two preallocated index files): Kafka has no
// such bound, the broker answers INVALID_PARTITIONS above it.
const maxCreatePartitions = 1000

// Kafka's DescribeConfigs sources, which CreateTopics v5+ reports for each
// configuration of a new topic.
const (
	configSourceTopic        int8 = 1 // DYNAMIC_TOPIC_CONFIG: set by CreateTopics
	configSourceStaticBroker int8 = 4 // STATIC_BROKER_CONFIG: a broker flag
	configSourceDefault      int8 = 5 // DEFAULT_CONFIG
)

// createTopic creates a topic of n partitions with its configuration
// overrides (kept in topicConfigsFile before the partitions are made, so a
// topic never exists without them). Errors: errInvalidTopic,
// errTopicExists, errStoreClosed, and I/O errors.
func (s *store) createTopic(name string, n int32, cfg topicConfig) error {
	if !validTopic(name) {
		return errInvalidTopic
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return errStoreClosed
	}
	if _, ok := s.mu.topics[name]; ok {
		return errTopicExists
	}
	if len(cfg) > 0 || s.mu.configsStale {
		if len(cfg) > 0 {
			s.mu.configs[name] = cfg
		}
		if err := s.saveConfigsLocked(); err != nil {
			delete(s.mu.configs, name)
			return err
		}
	}
	s.log.Info("creating topic", "topic", name, "partitions", n, "configs", cfg)
	if _, err := s.createLocked(name, n); err != nil {
		if _, ok := s.mu.configs[name]; ok {
			delete(s.mu.configs, name)
			err = errors.Join(err, s.saveConfigsLocked())
		}
		return err
	}
	return nil
}

// saveConfigsLocked writes the configs to topicConfigsFile and records
// whether the file may be stale. REQUIRES: s.mu held.
func (s *store) saveConfigsLocked() error {
	err := saveTopicConfigs(s.dir, s.mu.configs)
	s.mu.configsStale = err != nil
	return err
}

// deleteTopic deletes every partition of a topic with the Dir's removal
// (plog.Dir.DeletePartition: the directories renamed, dropped from the root
// checkpoints, removed) and then its configuration overrides. Requests
// holding a partition get ErrClosed from it from then on. Errors:
// errUnknownTopic, errStoreClosed, and I/O errors (the topic is gone from
// the store even then; OpenDir finishes a removal a crash interrupted).
// Overrides left in topicConfigsFile by a crash or a failed save never
// reach a same-name topic: openStore drops those of topics that are gone,
// and createTopic saves the file again before it creates one.
func (s *store) deleteTopic(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return errStoreClosed
	}
	ps, ok := s.mu.topics[name]
	if !ok {
		return errUnknownTopic
	}
	delete(s.mu.topics, name)
	var errs []error
	for i := range ps {
		if err := s.d.DeletePartition(name, int32(i)); err != nil {
			errs = append(errs, err)
		}
	}
	if _, ok := s.mu.configs[name]; ok {
		delete(s.mu.configs, name)
		if err := s.saveConfigsLocked(); err != nil {
			errs = append(errs, err)
		}
	}
	s.log.Info("deleted topic", "topic", name, "partitions", len(ps))
	return errors.Join(errs...)
}

// topicConfigOf returns a topic's configuration overrides (nil: none).
func (s *store) topicConfigOf(name string) topicConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.configs[name]
}

// collidingTopic returns an existing topic whose name differs from name
// only by '.' against '_' (Kafka refuses such a pair: their metric names
// collide), or "".
func (s *store) collidingTopic(name string) string {
	unify := func(n string) string { return strings.ReplaceAll(n, ".", "_") }
	if !strings.ContainsAny(name, "._") {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for t := range s.mu.topics {
		if t != name && unify(t) == unify(name) {
			return t
		}
	}
	return ""
}

// createPlan is a checked CreateTopics entry.
type createPlan struct {
	partitions  int32
	replication int16
	cfg         topicConfig
}

// topicError is a CreateTopics or DeleteTopics error: Kafka's code and
// message.
type topicError struct {
	code int16
	msg  string
}

// brokerIDs returns the brokers every partition is placed on: this node,
// or in cluster mode the current voters (every partition is replicated to
// all of them).
func (s *server) brokerIDs() []int32 {
	if s.cluster == nil {
		return []int32{nodeID}
	}
	var ids []int32
	for _, id := range s.cluster.bootConf().GetVoters() {
		ids = append(ids, int32(id))
	}
	slices.Sort(ids)
	return ids
}

// planTopic checks one CreateTopics entry as Kafka 3.9's controller does,
// in its order: name, existence, configurations, then the placement.
// Single mode places every partition on this node (replication factor 1);
// cluster mode replicates every partition of every topic to all the
// voters with the -partitions count each node creates a topic with, so it
// takes those or -1, and no configuration overrides (its cleanup policy
// is the nodes' flags).
func (s *server) planTopic(rt kmsg.CreateTopicsRequestTopic) (createPlan, *topicError) {
	name := rt.Topic
	switch {
	case !validTopic(name):
		return createPlan{}, &topicError{kerr.InvalidTopicException.Code, invalidTopicReason(name)}
	case isInternalTopic(name):
		if _, err := s.store.topic(name, false); err == nil {
			return createPlan{}, &topicError{kerr.TopicAlreadyExists.Code, fmt.Sprintf("Topic '%s' already exists.", name)}
		}
		return createPlan{}, &topicError{kerr.InvalidRequest.Code, fmt.Sprintf("%s is the broker's internal topic: the broker creates it", name)}
	}
	if _, err := s.store.topic(name, false); err == nil {
		return createPlan{}, &topicError{kerr.TopicAlreadyExists.Code, fmt.Sprintf("Topic '%s' already exists.", name)}
	}
	if other := s.store.collidingTopic(name); other != "" {
		return createPlan{}, &topicError{kerr.InvalidTopicException.Code, fmt.Sprintf("Topic '%s' collides with existing topic: %s", name, other)}
	}
	var nulls []string
	cfg := make(topicConfig)
	for _, c := range rt.Configs {
		if c.Value == nil {
			nulls = append(nulls, c.Name)
			continue
		}
		cfg[c.Name] = *c.Value
	}
	if len(nulls) > 0 {
		return createPlan{}, &topicError{kerr.InvalidConfig.Code, "Null value not supported for topic configs: " + strings.Join(nulls, ",")}
	}
	for _, n := range slices.Sorted(maps.Keys(cfg)) {
		if s.cluster != nil {
			return createPlan{}, &topicError{kerr.InvalidConfig.Code, fmt.Sprintf("%s: cluster mode applies the nodes' -cleanup-policy and -retention to every topic and takes no topic configs", n)}
		}
		if err := checkTopicConfig(n, cfg[n]); err != nil {
			return createPlan{}, &topicError{kerr.InvalidConfig.Code, strings.TrimPrefix(err.Error(), errInvalidConfig.Error()+": ")}
		}
	}
	if len(cfg) > 0 {
		if err := checkTopicConfigs(cfg, s.userCleanupConfig()); err != nil {
			return createPlan{}, &topicError{kerr.InvalidConfig.Code, strings.TrimPrefix(err.Error(), errInvalidConfig.Error()+": ")}
		}
	}
	if err := checkTopicTiering(cfg, s.store.tiering); err != nil {
		return createPlan{}, &topicError{kerr.InvalidConfig.Code, strings.TrimPrefix(err.Error(), errInvalidConfig.Error()+": ")}
	}
	brokers := s.brokerIDs()
	plan := createPlan{cfg: cfg, replication: int16(len(brokers))}
	if len(rt.ReplicaAssignment) > 0 {
		if rt.ReplicationFactor != -1 {
			return createPlan{}, &topicError{kerr.InvalidRequest.Code, "A manual partition assignment was specified, but replication factor was not set to -1."}
		}
		if rt.NumPartitions != -1 {
			return createPlan{}, &topicError{kerr.InvalidRequest.Code, "A manual partition assignment was specified, but numPartitions was not set to -1."}
		}
		seen := make(map[int32]bool)
		for _, a := range rt.ReplicaAssignment {
			if seen[a.Partition] {
				return createPlan{}, &topicError{kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("Found multiple manual partition assignments for partition %d", a.Partition)}
			}
			seen[a.Partition] = true
			got := slices.Sorted(slices.Values(a.Replicas))
			if !slices.Equal(got, brokers) {
				return createPlan{}, &topicError{kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("partition %d: replicas %v: every partition is on brokers %v", a.Partition, a.Replicas, brokers)}
			}
		}
		for i := range int32(len(seen)) {
			if !seen[i] {
				return createPlan{}, &topicError{kerr.InvalidReplicaAssignment.Code, "partitions should be a consecutive 0-based integer sequence"}
			}
		}
		plan.partitions = int32(len(seen))
	} else {
		switch rf := rt.ReplicationFactor; {
		case rf < -1 || rf == 0:
			return createPlan{}, &topicError{kerr.InvalidReplicationFactor.Code, "Replication factor must be larger than 0, or -1 to use the default value."}
		case rf != -1 && int(rf) != len(brokers):
			return createPlan{}, &topicError{kerr.InvalidReplicationFactor.Code, fmt.Sprintf("Unable to replicate the partition %d time(s): every partition is replicated to all %d broker(s)", rf, len(brokers))}
		}
		switch np := rt.NumPartitions; {
		case np < -1 || np == 0:
			return createPlan{}, &topicError{kerr.InvalidPartitions.Code, "Number of partitions was set to an invalid non-positive value."}
		case np == -1:
			plan.partitions = s.store.partitions
		default:
			plan.partitions = np
		}
	}
	switch {
	case plan.partitions > maxCreatePartitions:
		return createPlan{}, &topicError{kerr.InvalidPartitions.Code, fmt.Sprintf("Number of partitions %d is above the broker's limit of %d.", plan.partitions, maxCreatePartitions)}
	case s.cluster != nil && plan.partitions != s.store.partitions:
		return createPlan{}, &topicError{kerr.InvalidPartitions.Code, fmt.Sprintf("cluster mode creates every topic with the nodes' -partitions count, %d", s.store.partitions)}
	}
	return plan, nil
}

// invalidTopicReason says why Kafka refuses a topic name.
func invalidTopicReason(name string) string {
	switch {
	case name == "":
		return "Topic name is illegal, it can't be empty"
	case name == "." || name == "..":
		return "Topic name cannot be \".\" or \"..\""
	case len(name) > maxTopicLength:
		return fmt.Sprintf("Topic name is illegal, it can't be longer than %d characters, topic name: %s", maxTopicLength, name)
	}
	return fmt.Sprintf("Topic name \"%s\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
}

// createTopics answers CreateTopics (v0-7) as Kafka 3.9 does: each topic
// checked (planTopic), duplicates in the request refused with
// INVALID_REQUEST, validate_only (v1+) checking without creating; v5+
// answers carry the partition count, the replication factor and the topic's
// configurations the broker honours (no topic ids: v7's is zero).
func (s *server) createTopics(req *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	count := make(map[string]int)
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	var dups []string
	for _, rt := range req.Topics {
		if count[rt.Topic] > 1 {
			if !slices.Contains(dups, rt.Topic) {
				dups = append(dups, rt.Topic)
			}
			continue
		}
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic = rt.Topic
		plan, terr := s.planTopic(rt)
		if terr == nil && !req.ValidateOnly {
			if err := s.store.createTopic(rt.Topic, plan.partitions, plan.cfg); err != nil {
				terr = createErr(rt.Topic, err)
			}
		}
		if terr != nil {
			t.ErrorCode = terr.code
			if req.Version >= 1 {
				t.ErrorMessage = kmsg.StringPtr(terr.msg)
			}
			s.log.Info("topic not created", "topic", rt.Topic, "err", kerr.ErrorForCode(terr.code), "reason", terr.msg)
		} else {
			t.NumPartitions, t.ReplicationFactor = plan.partitions, plan.replication
			t.Configs = s.describeTopicConfigs(plan.cfg)
		}
		resp.Topics = append(resp.Topics, t)
	}
	for _, name := range dups {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic, t.ErrorCode = name, kerr.InvalidRequest.Code
		if req.Version >= 1 {
			t.ErrorMessage = kmsg.StringPtr("Duplicate topic name.")
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// createErr maps store.createTopic's errors to Kafka's.
func createErr(name string, err error) *topicError {
	switch {
	case errors.Is(err, errTopicExists): // created meanwhile
		return &topicError{kerr.TopicAlreadyExists.Code, fmt.Sprintf("Topic '%s' already exists.", name)}
	case errors.Is(err, errInvalidTopic):
		return &topicError{kerr.InvalidTopicException.Code, invalidTopicReason(name)}
	case errors.Is(err, errStoreClosed):
		return &topicError{kerr.NotController.Code, err.Error()}
	}
	return &topicError{kerr.KafkaStorageError.Code, err.Error()}
}

// topicDefaults is the cleanup configuration of a topic without overrides:
// the broker's -cleanup-policy and -retention, compaction's defaults
// otherwise.
func (s *server) topicDefaults() compaction.Config {
	return compaction.Config{CleanupPolicy: s.cleanupPolicy, Retention: s.retention}
}

// describeTopicConfigs lists, for a CreateTopics answer, the value of
// every configuration the broker honours per topic: the override, else
// the broker's flag (cleanup.policy, retention.ms; remote.storage.enable is
// true with -remote-dir or -remote-s3-endpoint), else Kafka's default.
func (s *server) describeTopicConfigs(cfg topicConfig) []kmsg.CreateTopicsResponseTopicConfig {
	def := s.topicDefaults()
	policy := def.CleanupPolicy
	if policy == "" {
		policy = compaction.PolicyDelete
	}
	retention := "604800000"
	switch {
	case def.Retention < 0:
		retention = "-1"
	case def.Retention > 0:
		retention = strconv.FormatInt(def.Retention.Milliseconds(), 10)
	}
	defaults := map[string]struct {
		v   string
		src int8
	}{
		"cleanup.policy":            {policy, configSourceStaticBroker},
		"retention.ms":              {retention, configSourceStaticBroker},
		"retention.bytes":           {"-1", configSourceDefault},
		"delete.retention.ms":       {strconv.FormatInt((24 * time.Hour).Milliseconds(), 10), configSourceDefault},
		"min.compaction.lag.ms":     {"0", configSourceDefault},
		"max.compaction.lag.ms":     {"9223372036854775807", configSourceDefault},
		"min.cleanable.dirty.ratio": {"0.5", configSourceDefault},
		remoteStorageEnable:         {"false", configSourceDefault},
	}
	if s.store.tiering && tieredTopic(cfg) {
		defaults[remoteStorageEnable] = struct {
			v   string
			src int8
		}{"true", configSourceStaticBroker}
	}
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, name := range slices.Sorted(maps.Keys(honouredConfigs)) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = name
		d := defaults[name]
		c.Value, c.Source = kmsg.StringPtr(d.v), d.src
		if v, ok := cfg[name]; ok {
			c.Value, c.Source = kmsg.StringPtr(v), configSourceTopic
		}
		out = append(out, c)
	}
	return out
}

// deleteTopics answers DeleteTopics (v0-6) as Kafka 3.9 does: each named
// topic's partitions are deleted (store.deleteTopic) and its groups'
// committed offsets with them, as Kafka's coordinator drops the offsets
// of deleted partitions; an unknown topic gets UNKNOWN_TOPIC_OR_PARTITION,
// a name given twice INVALID_REQUEST, a topic id (v6) UNKNOWN_TOPIC_ID (the
// broker keeps no topic ids). The internal topics are refused with
// INVALID_REQUEST (the coordinators live in them). Cluster mode deletes
// nothing: every topic gets TOPIC_DELETION_DISABLED (INVALID_REQUEST
// before v3), as a Kafka with delete.topic.enable=false answers, because
// a node that missed the deletion would create the topic again.
func (s *server) deleteTopics(req *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type entry struct {
		name *string
		id   [16]byte
	}
	var entries []entry
	for _, n := range req.TopicNames {
		entries = append(entries, entry{name: kmsg.StringPtr(n)})
	}
	for _, t := range req.Topics {
		entries = append(entries, entry{name: t.Topic, id: t.TopicID})
	}
	answer := func(e entry, code int16, msg string) {
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID, t.ErrorCode = e.name, e.id, code
		if msg != "" && req.Version >= 5 {
			t.ErrorMessage = kmsg.StringPtr(msg)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if s.cluster != nil {
		code, msg := kerr.TopicDeletionDisabled.Code, "Topic deletion is disabled: cluster mode does not delete topics."
		if req.Version < 3 {
			code = kerr.InvalidRequest.Code
		}
		for _, e := range entries {
			answer(e, code, msg)
		}
		return resp
	}
	count := make(map[string]int)
	for _, e := range entries {
		if e.name != nil && e.id == [16]byte{} {
			count[*e.name]++
		}
	}
	var deleted []string
	dupAnswered := make(map[string]bool)
	for _, e := range entries {
		switch {
		case e.name == nil && e.id == [16]byte{}:
			answer(e, kerr.InvalidRequest.Code, "Neither topic name nor id were specified.")
		case e.name == nil:
			answer(e, kerr.UnknownTopicID.Code, "")
		case e.id != [16]byte{}:
			answer(e, kerr.InvalidRequest.Code, "You may not specify both topic name and topic id.")
		case count[*e.name] > 1:
			if !dupAnswered[*e.name] { // one answer for the name
				dupAnswered[*e.name] = true
				answer(e, kerr.InvalidRequest.Code, "Duplicate topic name.")
			}
		case isInternalTopic(*e.name):
			answer(e, kerr.InvalidRequest.Code, fmt.Sprintf("%s is the broker's internal topic: its coordinator lives in it", *e.name))
		default:
			err := s.store.deleteTopic(*e.name)
			switch {
			case errors.Is(err, errUnknownTopic):
				answer(e, kerr.UnknownTopicOrPartition.Code, "")
			case errors.Is(err, errStoreClosed):
				answer(e, kerr.NotController.Code, err.Error())
			case err != nil:
				s.log.Error("topic deletion failed", "topic", *e.name, "err", err)
				deleted = append(deleted, *e.name)
				answer(e, kerr.KafkaStorageError.Code, err.Error())
			default:
				deleted = append(deleted, *e.name)
				answer(e, 0, "")
			}
		}
	}
	if len(deleted) > 0 {
		s.groups.dropTopicOffsets(deleted) // groupadmin.go
	}
	return resp
}
