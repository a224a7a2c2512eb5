package main

// The client matrix: besides franz-go (the other tests), librdkafka through
// Debian's kcat and python3-confluent-kafka, and kafka-python's admin client
// (Debian's python3-kafka), against the broker on
// 127.0.0.1 with an ephemeral port. A missing client skips its tests with a
// message, except under CI=true, where it fails them (.ci/run installs the
// clients).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// systemPython is Debian's interpreter, the one python3-confluent-kafka
// installs for (python3 on PATH may be another one, without the module).
const systemPython = "/usr/bin/python3"

// clientTimeout bounds every client command.
const clientTimeout = 90 * time.Second

// missingClient skips the test, or fails it under CI.
func missingClient(t *testing.T, what string) {
	t.Helper()
	require.Equal(t, "", os.Getenv("CI"), "%s is missing and CI is set: .ci/run installs it (apt-get install -y kcat python3-confluent-kafka python3-kafka)", what)
	t.Skipf("skipping: %s is not installed (apt-get install -y kcat python3-confluent-kafka python3-kafka; under CI=true this fails)", what)
}

// needKcat returns kcat's path.
func needKcat(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		missingClient(t, "kcat")
	}
	return p
}

// needConfluent checks that the system python has confluent_kafka.
func needConfluent(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		missingClient(t, systemPython)
	}
	out, err := exec.Command(systemPython, "-c", "import confluent_kafka").CombinedOutput()
	if err != nil {
		missingClient(t, fmt.Sprintf("python3-confluent-kafka (%s: %s)", err, bytes.TrimSpace(out)))
	}
}

// runClient runs a command bounded by clientTimeout and returns its stdout;
// a failure or a timeout fails the test with stderr.
func runClient(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	// At the deadline the whole process group is killed (bash -c leaves
	// kcat running otherwise), and Run stops waiting for output a
	// leftover process might still hold open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "%s %q did not finish within %v\nstdout: %s\nstderr: %s", name, args, clientTimeout, stdout.String(), stderr.String())
	require.NoError(t, err, "%s %q\nstdout: %s\nstderr: %s", name, args, stdout.String(), stderr.String())
	return stdout.String()
}

// runShell runs a README command line with bash, bounded like runClient.
func runShell(t *testing.T, line string) string {
	t.Helper()
	return runClient(t, "", "bash", "-c", line)
}

// ck runs testdata/ck_client.py and decodes its JSON line into v.
func ck(t *testing.T, v any, args ...string) {
	t.Helper()
	out := runClient(t, "", systemPython, append([]string{"testdata/ck_client.py"}, args...)...)
	require.NoError(t, json.Unmarshal([]byte(out), v), "ck_client.py %q printed %q", args, out)
}

// storedCodecs returns the codec of every batch stored in a partition
// directory (the broker must be stopped), with the record count.
func storedCodecs(t *testing.T, dir string) (codecs []batch.Compression, records int) {
	t.Helper()
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	for off := p.LogStartOffset(); off < p.LogEndOffset(); {
		recs, err := p.ReadFrom(off, 1<<20)
		require.NoError(t, err)
		rest := recs.Bytes()
		for len(rest) > 0 {
			var bt batch.Batch
			bt, rest, err = batch.Parse(rest)
			require.NoError(t, err)
			require.NoError(t, bt.Validate())
			codecs = append(codecs, bt.Attributes().Compression())
			records += int(bt.RecordsCount())
		}
		off = recs.NextOffset()
		require.NoError(t, recs.Close())
	}
	return codecs, records
}

// Every codec a librdkafka producer (kcat -z, confluent_kafka
// compression.type) is asked for is stored with that codec, and the records
// come back. librdkafka compresses gzip, snappy and lz4 only when the broker
// advertises Produce v0, and sends a batch uncompressed when compressing did
// not make it smaller: the values are compressible.
func TestLibrdkafkaCodecsStoredAsSent(t *testing.T) {
	kcat := needKcat(t)
	needConfluent(t)
	t.Parallel()
	dir := t.TempDir()
	b := startBroker(t, dir, 1)
	var lines strings.Builder
	for i := range 200 {
		fmt.Fprintf(&lines, "value-%03d-%s\n", i, strings.Repeat("abc", 40))
	}
	codecs := map[string]batch.Compression{
		"gzip": batch.CompressionGzip, "snappy": batch.CompressionSnappy,
		"lz4": batch.CompressionLZ4, "zstd": batch.CompressionZstd,
	}
	for name := range codecs {
		runClient(t, lines.String(), kcat, "-b", b.addr, "-t", "kcat-"+name, "-P", "-z", name, "-X", "linger.ms=50")
		out := runClient(t, "", kcat, "-b", b.addr, "-t", "kcat-"+name, "-C", "-o", "beginning", "-e", "-q")
		assert.Equal(t, lines.String(), out, "kcat %s: records read back", name)

		var produced struct{ Produced int }
		ck(t, &produced, "produce", b.addr, "ck-"+name, "100", name, "100")
		require.Equal(t, 100, produced.Produced)
	}
	b.stop(t)
	for name, want := range codecs {
		for topic, n := range map[string]int{"kcat-" + name: 200, "ck-" + name: 100} {
			got, records := storedCodecs(t, filepath.Join(dir, topic+"-0"))
			assert.Equal(t, n, records, topic)
			require.NotEmpty(t, got, topic)
			for _, c := range got {
				assert.Equal(t, want, c, "%s: stored batch codec", topic)
			}
		}
	}
}

// A confluent_kafka consumer group commits, stops and resumes from its
// committed offset, also across a broker restart; lag = end offset -
// committed offset, as the client computes it.
func TestConfluentGroupResumesAcrossRestart(t *testing.T) {
	needConfluent(t)
	t.Parallel()
	dir := t.TempDir()
	b := startBroker(t, dir, 1)
	var produced struct{ Produced int }
	ck(t, &produced, "produce", b.addr, "orders", "10", "none")

	type consumed struct {
		Values    []string
		Committed int64
	}
	type lag struct{ Committed, Low, High, Lag int64 }
	values := func(from, to int) []string {
		var v []string
		for i := from; i < to; i++ {
			v = append(v, fmt.Sprintf("m-%d", i))
		}
		return v
	}

	var c consumed
	ck(t, &c, "consume", b.addr, "orders", "billing", "4")
	assert.Equal(t, values(0, 4), c.Values)
	assert.EqualValues(t, 4, c.Committed)
	var l lag
	ck(t, &l, "lag", b.addr, "orders", "billing")
	assert.Equal(t, lag{Committed: 4, Low: 0, High: 10, Lag: 6}, l)

	// A new consumer of the group resumes after the commit.
	ck(t, &c, "consume", b.addr, "orders", "billing", "3")
	assert.Equal(t, values(4, 7), c.Values)

	// So does one after a broker restart (a new port: clients reconnect
	// through the new bootstrap address).
	b.stop(t)
	b = startBroker(t, dir, 1)
	ck(t, &l, "lag", b.addr, "orders", "billing")
	assert.Equal(t, lag{Committed: 7, Low: 0, High: 10, Lag: 3}, l)
	ck(t, &c, "consume", b.addr, "orders", "billing", "3")
	assert.Equal(t, values(7, 10), c.Values)
	ck(t, &l, "lag", b.addr, "orders", "billing")
	assert.Equal(t, lag{Committed: 10, Low: 0, High: 10, Lag: 0}, l)
}

// readmeBrokerSection returns the broker README's single-node section: from
// its heading to the next heading of the same level.
func readmeBrokerSection(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	s := string(b)
	const heading = "## A single node"
	i := strings.Index(s, heading)
	require.GreaterOrEqual(t, i, 0, "README has no broker section")
	s = s[i+len(heading):]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	return s
}

// readmeCommands returns the section's commands: its indented code lines
// and its ```python blocks.
func readmeCommands(t *testing.T, section string) (brokers, kcats, pythons []string) {
	t.Helper()
	inFence, fenceLang := false, ""
	var block strings.Builder
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "```") {
			if inFence {
				if fenceLang == "python" {
					pythons = append(pythons, block.String())
				}
				inFence = false
				continue
			}
			inFence, fenceLang = true, strings.TrimPrefix(line, "```")
			block.Reset()
			continue
		}
		if inFence {
			block.WriteString(line + "\n")
			continue
		}
		if !strings.HasPrefix(line, "    ") || strings.TrimSpace(line) == "" {
			continue
		}
		cmd := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(cmd, "go run ./examples/broker "):
			brokers = append(brokers, cmd)
		case strings.HasPrefix(cmd, "kcat "):
			kcats = append(kcats, cmd)
		default:
			assert.Failf(t, "README broker section: a command is not run by any test", "command %q", cmd)
		}
	}
	return brokers, kcats, pythons
}

var listeningRE = regexp.MustCompile(`msg="broker listening" addr=(\S+)`)

// startREADMEBroker runs one of the README's `go run ./examples/broker`
// lines with the built binary, its data directory (/tmp/partlog-broker or
// DIR) and tiered storage directory (/tmp/partlog-remote) replaced by
// temporary ones and its address by 127.0.0.1:0, and returns the address it listens on and a function that stops it with
// SIGINT and checks it exited cleanly.
func startREADMEBroker(t *testing.T, bin, line string) (addr string, stop func()) {
	t.Helper()
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	data := t.TempDir()
	args := strings.Fields(strings.TrimPrefix(line, "go run ./examples/broker"))
	hasAddr := false
	for i, a := range args {
		switch {
		case a == "/tmp/partlog-broker" || a == "DIR":
			args[i] = data
		case a == "/tmp/partlog-remote":
			args[i] = t.TempDir()
		case a == "-addr" && i+1 < len(args):
			args[i+1] = "127.0.0.1:0"
			hasAddr = true
		}
	}
	if !hasAddr {
		args = append(args, "-addr", "127.0.0.1:0")
	}
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	found := make(chan string, 1)
	var logs bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	select {
	case addr = <-found:
	case err := <-exited:
		require.Failf(t, "exited before listening", "%s: %v\n%s", line, err, logs.String())
	case <-time.After(clientTimeout):
		_ = cmd.Process.Kill()
		require.Failf(t, "did not listen in time", "%s did not listen within %v", line, clientTimeout)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		select {
		case err := <-exited:
			require.NoError(t, err, "%s after SIGINT", line)
		case <-time.After(clientTimeout):
			_ = cmd.Process.Kill()
			require.Failf(t, "did not stop after SIGINT", "%s did not stop within %v of SIGINT", line, clientTimeout)
		}
	}
	t.Cleanup(stop)
	return addr, stop
}

// Every command of the README's broker section runs and does what the
// README says: each `go run ./examples/broker` line (built once, on an
// ephemeral port and a temporary directory), and against each of them the
// kcat lines exactly as written but for the address (produce, consume with
// -e, which must exit at the end, -L, -Q) and the python snippet.
func TestREADMEBrokerCommands(t *testing.T) {
	needKcat(t)
	needConfluent(t)
	t.Parallel()
	brokers, kcats, pythons := readmeCommands(t, readmeBrokerSection(t))
	require.NotEmpty(t, brokers)
	require.NotEmpty(t, kcats)
	require.Len(t, pythons, 1)

	bin := filepath.Join(t.TempDir(), "broker")
	runClient(t, "", "go", "build", "-o", bin, ".")
	for _, line := range brokers {
		t.Run(line, func(t *testing.T) {
			addr, stop := startREADMEBroker(t, bin, line)
			produced := 0
			for _, k := range kcats {
				out := runShell(t, strings.ReplaceAll(k, "127.0.0.1:9092", addr))
				switch {
				case strings.Contains(k, " -P"):
					produced++
				case strings.Contains(k, " -C") && strings.Contains(k, " -e"):
					assert.Equal(t, strings.Repeat("hello\n", produced), out, "%s", k)
				case strings.Contains(k, " -L"):
					assert.Contains(t, out, `topic "orders" with`, "%s", k)
					assert.Contains(t, out, "broker 0 at "+addr, "%s", k)
				case strings.Contains(k, " -Q"):
					assert.Regexp(t, `orders \[0\] offset \d+`, out, "%s", k)
				default:
					assert.Failf(t, "no check for a README command", "command %q", k)
				}
			}
			script := strings.ReplaceAll(pythons[0], "127.0.0.1:9092", addr)
			out := runClient(t, "", systemPython, "-c", script)
			assert.Contains(t, out, "hello", "the python snippet reads what kcat produced")
			stop()
		})
	}
}

// needKafkaPython checks that the system python has kafka-python
// (Debian's python3-kafka).
func needKafkaPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		missingClient(t, systemPython)
	}
	out, err := exec.Command(systemPython, "-c", "import kafka").CombinedOutput()
	if err != nil {
		missingClient(t, fmt.Sprintf("python3-kafka (%s: %s)", err, bytes.TrimSpace(out)))
	}
}

// kafka-python's KafkaAdminClient (Debian's python3-kafka) describes,
// lists and deletes consumer groups as against Kafka: a KafkaConsumer's
// group is Stable with the member's client id, host and partition; its
// committed offset is listed; deleting it while the member is there fails
// (NON_EMPTY_GROUP); after the member left it is Empty, and deleting it
// removes it and its offsets.
func TestKafkaPythonAdminGroups(t *testing.T) {
	needKafkaPython(t)
	t.Parallel()
	b := startBroker(t, t.TempDir(), 1)
	rc := dialRaw(t, b.addr)
	require.Equal(t, int16(0), produceRaw(t, rc, 7, "orders", 0, buildBatch(t, "o", 5, batch.CompressionNone)).ErrorCode)
	type member struct {
		ClientID   string `json:"client_id"`
		ClientHost string `json:"client_host"`
		Assigned   []int32
	}
	type description struct {
		State        string
		ProtocolType string `json:"protocol_type"`
		Protocol     string
		Members      []member
	}
	var got struct {
		Stable, Empty    description
		Listed           [][]string
		ListedAfter      [][]string `json:"listed_after"`
		Offsets          map[string]int64
		OffsetsAfter     map[string]int64 `json:"offsets_after"`
		DeleteWithMember []string         `json:"delete_with_member"`
		Delete           []string
	}
	out := runClient(t, "", systemPython, "testdata/kp_admin.py", b.addr, "orders", "billing")
	require.NoError(t, json.Unmarshal([]byte(out), &got), "kp_admin.py printed %q", out)
	assert.Equal(t, "Stable", got.Stable.State)
	assert.Equal(t, "consumer", got.Stable.ProtocolType)
	assert.NotEmpty(t, got.Stable.Protocol)
	assert.Equal(t, []member{{ClientID: "kp-consumer", ClientHost: "/127.0.0.1", Assigned: []int32{0}}}, got.Stable.Members)
	assert.Equal(t, [][]string{{"billing", "consumer"}}, got.Listed)
	assert.Equal(t, map[string]int64{"0": 3}, got.Offsets)
	assert.Equal(t, []string{"NonEmptyGroupError"}, got.DeleteWithMember)
	assert.Equal(t, "Empty", got.Empty.State)
	assert.Empty(t, got.Empty.Members)
	assert.Equal(t, []string{"NoError"}, got.Delete)
	assert.Empty(t, got.ListedAfter)
	assert.Empty(t, got.OffsetsAfter)
}

// kafka-python's KafkaAdminClient (Debian's python3-kafka: CreateTopics and
// DeleteTopics v3) creates, lists, describes and deletes topics as against
// Kafka: a topic with a partition count and one with cleanup.policy=compact
// are created, creating one again raises TopicAlreadyExistsError, a
// replication factor of 3 InvalidReplicationFactorError, no partitions
// InvalidPartitionsError, a bad name InvalidTopicError, a configuration the
// broker does not take per topic InvalidConfigurationError; validate_only
// creates nothing; list_topics and describe_topics show the partitions led
// by broker 0; a deleted topic is no longer listed and deleting it again
// raises UnknownTopicOrPartitionError.
func TestKafkaPythonAdminTopics(t *testing.T) {
	needKafkaPython(t)
	t.Parallel()
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) { c.DisableAutoCreate = true })
	var got struct {
		Create          string
		CreateAgain     string `json:"create_again"`
		CreateRF3       string `json:"create_rf3"`
		CreateZero      string `json:"create_zero"`
		CreateBadName   string `json:"create_bad_name"`
		CreateBadConfig string `json:"create_bad_config"`
		ValidateOnly    string `json:"validate_only"`
		Listed          []string
		Described       map[string]struct {
			Error      int16
			Partitions [][]any
		}
		Delete      string
		DeleteAgain string   `json:"delete_again"`
		ListedAfter []string `json:"listed_after"`
	}
	out := runClient(t, "", systemPython, "testdata/kp_topics.py", b.addr)
	require.NoError(t, json.Unmarshal([]byte(out), &got), "kp_topics.py printed %q", out)
	assert.Equal(t, "NoError", got.Create)
	assert.Equal(t, "TopicAlreadyExistsError", got.CreateAgain)
	assert.Equal(t, "InvalidReplicationFactorError", got.CreateRF3)
	assert.Equal(t, "InvalidPartitionsError", got.CreateZero)
	assert.Equal(t, "InvalidTopicError", got.CreateBadName)
	assert.Equal(t, "InvalidConfigurationError", got.CreateBadConfig)
	assert.Equal(t, "NoError", got.ValidateOnly)
	assert.Equal(t, []string{"kp-compacted", "kp-orders"}, got.Listed, "validate_only created nothing")
	onBroker0 := func(p int) []any { return []any{float64(p), float64(0), []any{float64(0)}, []any{float64(0)}} }
	assert.Equal(t, [][]any{onBroker0(0), onBroker0(1), onBroker0(2)}, got.Described["kp-orders"].Partitions)
	assert.Equal(t, [][]any{onBroker0(0)}, got.Described["kp-compacted"].Partitions)
	assert.Equal(t, "NoError", got.Delete)
	assert.Equal(t, "UnknownTopicOrPartitionError", got.DeleteAgain)
	assert.Equal(t, []string{"kp-compacted"}, got.ListedAfter)
}

// kcat's metadata listing (-L, librdkafka's Metadata request) prints what it
// prints against a one-broker Kafka: the broker as controller, every topic
// (the internal ones too, with one partition each here where Kafka has 50
// and 50) with each partition led by broker 0, replicas and in-sync
// replicas 0; -t lists one topic; an unknown topic (auto-creation off) gets
// Kafka's UNKNOWN_TOPIC_OR_PARTITION; -J prints the same as JSON.
func TestKcatMetadataListing(t *testing.T) {
	kcat := needKcat(t)
	t.Parallel()
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) { c.DisableAutoCreate = true })
	rc := dialRaw(t, b.addr)
	for name, rt := range createTopics(t, rc, 7, false, newTopic("orders", 3, 1), newTopic("events", 1, 1)) {
		require.Equal(t, int16(0), rt.ErrorCode, "%s: %s", name, codeName(rt.ErrorCode))
	}
	head := func(what string, topics int) string {
		return fmt.Sprintf("Metadata for %s (from broker 0: %s/0):\n 1 brokers:\n  broker 0 at %s (controller)\n %d topics:\n", what, b.addr, b.addr, topics)
	}
	topic := func(name string, partitions int) string {
		s := fmt.Sprintf("  topic %q with %d partitions:\n", name, partitions)
		for p := range partitions {
			s += fmt.Sprintf("    partition %d, leader 0, replicas: 0, isrs: 0\n", p)
		}
		return s
	}
	out := runClient(t, "", kcat, "-b", b.addr, "-L")
	assert.Equal(t, head("all topics", 4)+topic(offsetsTopic, 1)+topic(txnStateTopic, 1)+topic("events", 1)+topic("orders", 3), out)
	out = runClient(t, "", kcat, "-b", b.addr, "-L", "-t", "orders")
	assert.Equal(t, head("orders", 1)+topic("orders", 3), out)
	out = runClient(t, "", kcat, "-b", b.addr, "-L", "-t", "nope")
	assert.Equal(t, head("nope", 1)+"  topic \"nope\" with 0 partitions: Broker: Unknown topic or partition\n", out)

	var listing struct {
		ControllerID int `json:"controllerid"`
		Brokers      []struct {
			ID   int
			Name string
		}
		Topics []struct {
			Topic      string
			Partitions []struct{ Partition, Leader int }
		}
	}
	out = runClient(t, "", kcat, "-b", b.addr, "-L", "-J")
	require.NoError(t, json.Unmarshal([]byte(out), &listing), "kcat -L -J printed %q", out)
	assert.Equal(t, 0, listing.ControllerID)
	require.Len(t, listing.Brokers, 1)
	assert.Equal(t, b.addr, listing.Brokers[0].Name)
	counts := make(map[string]int)
	for _, tp := range listing.Topics {
		counts[tp.Topic] = len(tp.Partitions)
	}
	assert.Equal(t, map[string]int{offsetsTopic: 1, txnStateTopic: 1, "events": 1, "orders": 3}, counts)
}
