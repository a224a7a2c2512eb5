package main

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	plog "github.com/partlog/partlog/log"
)

// offsetsTopic is the internal topic holding committed offsets. The broker
// gives it one partition.
const offsetsTopic = "__consumer_offsets"

// maxTopicLength is Kafka's limit on topic names.
const maxTopicLength = 249

// store owns the partitions: DataDir is a Kafka log directory (a
// partlog Dir: one Partition per topic-partition in
// DataDir/<topic>-<partition>, Kafka's checkpoints at the root). Topics
// are created on first use.
//
// The topic map is guarded by mu; the Partitions themselves are safe for
// concurrent use. Parked fetches wait on the partitions (Partition.Wait).
type store struct {
	dir        string
	d          *plog.Dir
	partitions int32
	pcfg       plog.Config // user topics
	offsetsCfg plog.Config // __consumer_offsets and __transaction_state
	log        *slog.Logger
	// tiering reports that the Dir has remote storage (-remote-dir,
	// -remote-s3-*); which topics it tiers is tieredLocked's rule.
	tiering bool

	mu struct {
		sync.Mutex
		topics map[string][]*plog.Partition
		// configs holds the topics' configuration overrides
		// (CreateTopics), kept in topicConfigsFile.
		configs map[string]topicConfig
		// configsStale: a save of configs failed, so topicConfigsFile
		// may hold overrides of a deleted topic; createTopic saves it
		// first, or a same-name topic would inherit them on restart.
		configsStale bool
		closed       bool
		// onCreate, set by watch, is called for each partition created.
		onCreate func(topic string, partition int32, p *plog.Partition)
	}
}

// storeConfig is the partition configuration the store opens partitions
// with (0 fields: the log package's defaults).
type storeConfig struct {
	segmentBytes        int64 // segment.bytes of user topics
	offsetsSegmentBytes int64 // segment.bytes of __consumer_offsets
	indexBytes          int   // segment.index.bytes of every partition
	// replicated: every topic (the internal ones too) is replicated through raft (cluster
	// mode): the high watermark is the commit index, set by the
	// replica, and batches carry the raft term as leader epoch.
	replicated bool
	// remote, when set, tiers the user topics (tiering.go): its
	// TopicEnabled is replaced by the store's rule.
	remote *plog.RemoteConfig
}

// openStore opens dir as a Kafka log directory (plog.OpenDir: every
// partition directory "<topic>-<partition>" in it, with the root
// checkpoints; other entries are left alone) and creates missing
// partitions of a topic up to its highest partition number.
func openStore(dir string, partitions int32, sc storeConfig, logger *slog.Logger) (*store, error) {
	s := &store{
		dir:        dir,
		partitions: partitions,
		pcfg:       plog.Config{SegmentBytes: sc.segmentBytes, SegmentIndexBytes: sc.indexBytes, Logger: logger, DisableAutoHighWatermark: sc.replicated, StampLeaderEpoch: sc.replicated},
		offsetsCfg: plog.Config{SegmentBytes: sc.offsetsSegmentBytes, SegmentIndexBytes: sc.indexBytes, Logger: logger, DisableAutoHighWatermark: sc.replicated, StampLeaderEpoch: sc.replicated},
		log:        logger,
	}
	s.mu.topics = make(map[string][]*plog.Partition)
	// The configurations first: whether a partition is tiered depends on
	// its topic's, and OpenDir asks for every partition it opens.
	configs, err := loadTopicConfigs(dir)
	if err != nil {
		return nil, err
	}
	s.mu.configs = configs
	dcfg := plog.DirConfig{
		Config: s.pcfg,
		TopicConfig: func(topic string) *plog.Config {
			if isInternalTopic(topic) {
				return &s.offsetsCfg
			}
			return nil
		},
	}
	if sc.remote != nil {
		rc := *sc.remote
		rc.TopicEnabled = s.tieredLocked
		dcfg.Remote = &rc
	}
	d, err := plog.OpenDir(dir, dcfg)
	if err != nil {
		return nil, err
	}
	s.d = d
	s.tiering = sc.remote != nil
	counts := make(map[string]int32)
	for _, tp := range d.Partitions() {
		counts[tp.Topic] = max(counts[tp.Topic], tp.Partition+1)
	}
	names := make([]string, 0, len(counts))
	for t := range counts {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		if _, err := s.createLocked(t, counts[t]); err != nil {
			_ = s.close()
			return nil, err
		}
	}
	// A crash between a deletion's partitions and its configurations
	// leaves configurations of a topic that is gone: drop them.
	stale := false
	for t := range s.mu.configs {
		if _, ok := s.mu.topics[t]; !ok {
			delete(s.mu.configs, t)
			stale = true
		}
	}
	if stale {
		if err := saveTopicConfigs(dir, s.mu.configs); err != nil {
			_ = s.close()
			return nil, err
		}
	}
	return s, nil
}

// validTopic reports whether name is a legal Kafka topic name: 1 to 249
// characters of [a-zA-Z0-9._-], not "." or "..".
func validTopic(name string) bool {
	if name == "" || len(name) > maxTopicLength || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// errUnknownTopic and errInvalidTopic are what topic returns for a topic it
// does not have and may not create, and for an illegal name.
var (
	errUnknownTopic = errors.New("broker: unknown topic")
	errInvalidTopic = errors.New("broker: invalid topic name")
	errStoreClosed  = errors.New("broker: shutting down")
	errCreateLimit  = errors.New("broker: topic creation limit of the request reached")
	errTopicExists  = errors.New("broker: topic already exists")
)

// createBudget is how many topics one request may still create; a nil
// *createBudget creates none.
type createBudget struct{ left int }

// newCreateBudget returns the budget of one request: nil when
// auto-creation is off.
func (s *server) newCreateBudget() *createBudget {
	if !s.autoCreate {
		return nil
	}
	return &createBudget{left: s.createPerReq}
}

// topicCreating returns the partitions of a topic, creating it when it does
// not exist and the request's budget allows (one topic less in the budget).
// Without budget it returns errUnknownTopic; with an exhausted one,
// errCreateLimit.
func (s *store) topicCreating(name string, b *createBudget) ([]*plog.Partition, error) {
	if b == nil {
		return s.topic(name, false)
	}
	ps, err := s.topic(name, false)
	if !errors.Is(err, errUnknownTopic) {
		return ps, err
	}
	if b.left <= 0 {
		return nil, errCreateLimit
	}
	ps, err = s.topic(name, true)
	if err == nil {
		b.left--
	}
	return ps, err
}

// topic returns the partitions of a topic, creating the topic with the
// configured partition count when create is set and it does not exist.
func (s *store) topic(name string, create bool) ([]*plog.Partition, error) {
	if !validTopic(name) {
		return nil, errInvalidTopic
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, errStoreClosed
	}
	if ps, ok := s.mu.topics[name]; ok {
		return ps, nil
	}
	if !create {
		return nil, errUnknownTopic
	}
	n := s.partitions
	if isInternalTopic(name) {
		n = 1
	}
	s.log.Info("creating topic", "topic", name, "partitions", n)
	return s.createLocked(name, n)
}

// createLocked returns partitions 0..n-1 of topic, creating the missing
// ones in the Dir (OpenDir opened the existing ones; it finished or undid
// what a crash left of a compaction, as plog.Open does).
// REQUIRES: s.mu held, or s not yet shared.
func (s *store) createLocked(topic string, n int32) ([]*plog.Partition, error) {
	ps := make([]*plog.Partition, 0, n)
	for i := range n {
		p, err := s.d.CreatePartition(topic, i)
		if err != nil {
			return nil, fmt.Errorf("open %s-%d: %w", topic, i, err)
		}
		ps = append(ps, p)
	}
	s.mu.topics[topic] = ps
	if s.mu.onCreate != nil {
		for i, p := range ps {
			s.mu.onCreate(topic, int32(i), p)
		}
	}
	return ps, nil
}

// topicNames returns the topics in name order.
func (s *store) topicNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.mu.topics))
	for t := range s.mu.topics {
		names = append(names, t)
	}
	sort.Strings(names)
	return names
}

// maxProducerID returns the largest producer id any partition holds state
// for, or -1. Partitions whose state cannot be read are skipped (they fail
// on their own when used).
func (s *store) maxProducerID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	largest := int64(-1)
	for _, ps := range s.mu.topics {
		for _, p := range ps {
			states, err := p.Producers()
			if err != nil {
				continue
			}
			for _, st := range states {
				largest = max(largest, st.ProducerID)
			}
		}
	}
	return largest
}

// topicCount returns the number of topics.
func (s *store) topicCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.topics)
}

// close closes the Dir (every partition seals and syncs; the root
// checkpoints and the clean-shutdown marker are written). Later topic
// calls fail with errStoreClosed.
func (s *store) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	s.mu.closed = true
	return s.d.Close()
}

// watch calls fn, under the store's lock, for every partition that exists
// and for every one created from now on (cluster mode starts a replica for
// each). fn must not call the store.
func (s *store) watch(fn func(topic string, partition int32, p *plog.Partition)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.onCreate = fn
	names := make([]string, 0, len(s.mu.topics))
	for t := range s.mu.topics {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		for i, p := range s.mu.topics[t] {
			fn(t, int32(i), p)
		}
	}
}
