package main

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafka39Versions is the "validVersions" of Kafka 3.9's request schemas
// (clients/src/main/resources/common/message/<API>Request.json on
// apache/kafka's 3.9 branch, commit c821449fb7c1) for every API the broker
// implements; none of them has "latestVersionUnstable" there.
var kafka39Versions = map[kmsg.Key]versionRange{
	kmsg.Produce:            {0, 11},
	kmsg.Fetch:              {0, 17},
	kmsg.ListOffsets:        {0, 9},
	kmsg.Metadata:           {0, 12},
	kmsg.OffsetCommit:       {0, 9},
	kmsg.OffsetFetch:        {0, 9},
	kmsg.FindCoordinator:    {0, 6},
	kmsg.JoinGroup:          {0, 9},
	kmsg.Heartbeat:          {0, 4},
	kmsg.LeaveGroup:         {0, 5},
	kmsg.SyncGroup:          {0, 5},
	kmsg.DescribeGroups:     {0, 5},
	kmsg.ListGroups:         {0, 5},
	kmsg.DeleteGroups:       {0, 2},
	kmsg.CreateTopics:       {0, 7},
	kmsg.DeleteTopics:       {0, 6},
	kmsg.ApiVersions:        {0, 4},
	kmsg.InitProducerID:     {0, 5},
	kmsg.AddPartitionsToTxn: {0, 5},
	kmsg.AddOffsetsToTxn:    {0, 4},
	kmsg.EndTxn:             {0, 4},
	kmsg.TxnOffsetCommit:    {0, 4},
	kmsg.WriteTxnMarkers:    {0, 1},
	kmsg.AddRaftVoter:       {0, 0},
	kmsg.RemoveRaftVoter:    {0, 0},
}

// aboveKafka39 are the APIs whose broker upper bound is above Kafka 3.9's,
// with the reason (the README says it too).
var aboveKafka39 = map[kmsg.Key]string{
	kmsg.AddRaftVoter: "v1 is Kafka 4.0's (ack_when_committed), which -add-voter sets",
}

// parseVersions parses "0-9" or "0".
func parseVersions(t *testing.T, s string) versionRange {
	t.Helper()
	lo, hi, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		hi = lo
	}
	a, err := strconv.Atoi(lo)
	require.NoError(t, err, "version range %q", s)
	b, err := strconv.Atoi(hi)
	require.NoError(t, err, "version range %q", s)
	return versionRange{int16(a), int16(b)}
}

// splitCell splits a table cell naming several APIs or ranges ("a, b",
// "a / b"); "X each" stands for X n times.
func splitCell(cell string, n int) []string {
	cell = strings.TrimSpace(cell)
	if v, ok := strings.CutSuffix(cell, " each"); ok {
		out := make([]string, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	f := strings.FieldsFunc(cell, func(r rune) bool { return r == ',' || r == '/' })
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f
}

// The README's version table says what the code does: every API of
// `supported` has a row, its broker column is the code's range, its Kafka
// 3.9 column is Kafka 3.9's schema range (kafka39Versions); every lower
// bound is Kafka 3.9's, and no upper bound is above Kafka 3.9's but those
// of aboveKafka39.
func TestREADMEApiVersionsTable(t *testing.T) {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	names := make(map[string]kmsg.Key)
	for k := range kmsg.Key(100) {
		if n := kmsg.NameForKey(int16(k)); n != "" {
			names[n] = k
		}
	}
	inTable := make(map[kmsg.Key]bool)
	const header = "| API | Kafka 3.9 | broker | notes |"
	_, rest, ok := strings.Cut(string(b), header+"\n")
	require.True(t, ok, "README has no %q table", header)
	for _, line := range strings.Split(rest, "\n")[1:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		require.GreaterOrEqual(t, len(cells), 5, "row %q", line)
		apis := splitCell(cells[1], 0)
		kafka := splitCell(cells[2], len(apis))
		broker := splitCell(cells[3], len(apis))
		require.Len(t, kafka, len(apis), "row %q: Kafka 3.9 column", line)
		require.Len(t, broker, len(apis), "row %q: broker column", line)
		for i, name := range apis {
			k, ok := names[name]
			require.True(t, ok, "row %q: %q is no API kmsg knows", line, name)
			inTable[k] = true
			assert.Equal(t, supported[k], parseVersions(t, broker[i]), "%s: README broker column against the code", name)
			assert.Equal(t, kafka39Versions[k], parseVersions(t, kafka[i]), "%s: README Kafka 3.9 column against Kafka 3.9's schema", name)
		}
	}
	for k, vr := range supported {
		name := kmsg.NameForKey(int16(k))
		assert.True(t, inTable[k], "%s is supported but not in the README table", name)
		kv, ok := kafka39Versions[k]
		require.True(t, ok, "%s: no Kafka 3.9 range recorded", name)
		assert.Equal(t, kv.min, vr.min, "%s: lower bound differs from Kafka 3.9's", name)
		if _, above := aboveKafka39[k]; !above {
			assert.LessOrEqual(t, vr.max, kv.max, "%s: upper bound above Kafka 3.9's", name)
		}
	}
}
