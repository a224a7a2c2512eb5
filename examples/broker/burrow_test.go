package main

// Burrow 1.2.1 (Debian's burrow package), LinkedIn's consumer lag monitor,
// against the broker: its cluster module reads end offsets with ListOffsets
// v0, its consumer module reads the commits and group metadata records of
// __consumer_offsets, and its HTTP API reports each partition's lag and
// owner. Burrow keeps its own state in ZooKeeper, which the test starts
// from Debian's zookeeper package (its jar, on a free port, with a
// temporary data directory). Both are skipped when missing, except under
// CI=true, where they fail the test (.ci/run installs them).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// zookeeperJar is Debian's zookeeper package's server jar (its manifest
// names the libraries it needs).
const zookeeperJar = "/usr/share/java/zookeeper.jar"

// missingOpsTool skips the test, or fails it under CI.
func missingOpsTool(t *testing.T, what string) {
	t.Helper()
	require.Equal(t, "", os.Getenv("CI"), "%s is missing and CI is set: .ci/run installs it (apt-get install -y burrow zookeeper)", what)
	t.Skipf("skipping: %s is not installed (apt-get install -y burrow zookeeper; under CI=true this fails)", what)
}

// startProcess runs cmd with its output in a file of dir, and kills it at
// the end of the test; on failure the output is logged.
func startProcess(t *testing.T, dir, name string, cmd *exec.Cmd) {
	t.Helper()
	out, err := os.Create(filepath.Join(dir, name+".out"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr, cmd.Dir = out, out, dir
	require.NoError(t, cmd.Start(), "starting %s", name)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("%s output (last 4 KiB):\n%s", name, b[max(0, len(b)-4096):])
		}
	})
}

// startZooKeeper runs a standalone ZooKeeper on a free loopback port and
// returns its address once it accepts connections.
func startZooKeeper(t *testing.T, dir string) string {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		missingOpsTool(t, "java")
	}
	if _, err := os.Stat(zookeeperJar); err != nil {
		missingOpsTool(t, zookeeperJar)
	}
	addr := freeAddr(t)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	data := filepath.Join(dir, "zookeeper")
	require.NoError(t, os.MkdirAll(data, 0o755))
	// ZooKeeperServerMain PORT DIR: standalone, listening on every
	// address; no admin server (it would take port 8080).
	startProcess(t, dir, "zookeeper", exec.Command(java, "-Xmx128m", "-Dzookeeper.admin.enableServer=false",
		"-Dzookeeper.4lw.commands.whitelist=srvr", "-cp", zookeeperJar,
		"org.apache.zookeeper.server.ZooKeeperServerMain", port, data))
	// It accepts connections before it serves them (it closes them
	// then): ready is when srvr describes the server.
	require.Eventually(t, func() bool {
		return strings.HasPrefix(zkCommand(addr, "srvr"), "Zookeeper version")
	}, 30*time.Second, 100*time.Millisecond, "ZooKeeper did not serve on %s", addr)
	return addr
}

// zkCommand sends one of ZooKeeper's four-letter commands and returns the
// answer ("" when there is none).
func zkCommand(addr, cmd string) string {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return ""
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// burrowConfig is Burrow's burrow.toml for one cluster, "local", whose
// offsets it refreshes every second, keeping its state under zkRoot.
func burrowConfig(dir, zk, zkRoot, broker, httpAddr string) string {
	return fmt.Sprintf(`[general]
pidfile=%q

[logging]
level="info"

[zookeeper]
servers=[%q]
timeout=6
root-path=%q

[client-profile.test]
client-id="burrow-test"
kafka-version="2.0.0"

[cluster.local]
class-name="kafka"
servers=[%q]
client-profile="test"
topic-refresh=1
offset-refresh=1

[consumer.local]
class-name="kafka"
cluster="local"
servers=[%q]
client-profile="test"

[httpserver.default]
address=%q

[storage.default]
class-name="inmemory"
workers=2
intervals=10
expire-group=604800
min-distance=1
`, filepath.Join(dir, "burrow.pid"), zk, zkRoot, broker, broker, httpAddr)
}

// burrowGet decodes one answer of Burrow's HTTP API into v; false when
// Burrow does not answer (yet) or answers an error.
func burrowGet(base, path string, v any) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(v) == nil
}

// burrowPartition is one partition of Burrow's consumer detail answer.
type burrowPartition struct {
	Offsets []*struct {
		Offset int64 `json:"offset"`
	} `json:"offsets"`
	Owner      string `json:"owner"`
	ClientID   string `json:"client_id"`
	CurrentLag int64  `json:"current-lag"`
}

// TestBurrow runs Burrow 1.2.1 against the broker: a group that consumed a
// 10-record topic and committed offset 6 has lag 4 in Burrow's API (end
// offsets read with ListOffsets v0). With group metadata records at value
// version 1 (what a Kafka with inter.broker.protocol.version 2.0 writes,
// the newest Burrow 1.2.1 decodes) the partition's owner and client id are
// the member's host and client id; at version 3, Kafka 3.9's, Burrow 1.2.1
// logs that it cannot decode them and shows the lag without an owner, as it
// does against Kafka 3.9.
func TestBurrow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ZooKeeper and Burrow")
	}
	burrow, err := exec.LookPath("Burrow")
	if err != nil {
		missingOpsTool(t, "Burrow")
	}
	dir := t.TempDir()
	zk := startZooKeeper(t, dir)

	t.Run("value v1", func(t *testing.T) {
		got, log := runBurrow(t, burrow, zk, 1, true)
		require.Equal(t, "/127.0.0.1", got.Owner)
		require.Equal(t, "lag-client", got.ClientID)
		require.NotContains(t, log, "failed to decode", "Burrow decoded every record")
	})
	t.Run("value v3", func(t *testing.T) {
		got, log := runBurrow(t, burrow, zk, 3, false)
		require.Empty(t, got.Owner)
		require.Regexp(t, `"failed to decode".*"message_type":"metadata","group":"lagtest","reason":"value version","version":3`, log)
	})
}

// runBurrow starts a broker writing group metadata value version v and a
// Burrow watching it; a member of group lagtest (client id lag-client)
// consumes the 10 records of orders and commits offset 6. It returns
// Burrow's view of orders[0] once the lag is exact (4) and, with
// wantOwner, the owner is known, and Burrow's log.
func runBurrow(t *testing.T, burrow, zk string, v int16, wantOwner bool) (burrowPartition, string) {
	dir := t.TempDir()
	b := startBrokerWith(t, filepath.Join(dir, "broker"), 1, func(c *config) { c.GroupMetadataVersion = v })
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	producer := newClient(t, b.addr, kgo.AllowAutoTopicCreation())
	for i := range 10 {
		require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: fmt.Appendf(nil, "order-%d", i)}).FirstErr())
	}

	httpAddr := freeAddr(t)
	base := "http://" + httpAddr
	conf := filepath.Join(dir, "burrow")
	require.NoError(t, os.MkdirAll(conf, 0o755))
	root := fmt.Sprintf("/burrow-v%d", v) // each run's own state in ZooKeeper
	require.NoError(t, os.WriteFile(filepath.Join(conf, "burrow.toml"), []byte(burrowConfig(dir, zk, root, b.addr, httpAddr)), 0o644))
	startProcess(t, dir, "burrow", exec.Command(burrow, "--config-dir", conf))

	// The end offset, read with ListOffsets v0.
	require.Eventually(t, func() bool {
		var topic struct {
			Offsets []int64 `json:"offsets"`
		}
		return burrowGet(base, "/v3/kafka/local/topic/orders", &topic) && len(topic.Offsets) == 1 && topic.Offsets[0] == 10
	}, 30*time.Second, 200*time.Millisecond, "Burrow never saw the end offset of orders")

	// A member of the group, in it until the end of the test, commits 6.
	consumer := newClient(t, b.addr, kgo.ClientID("lag-client"), kgo.ConsumerGroup("lagtest"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	consume(ctx, t, consumer, 10)
	var commitErr error
	consumer.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"orders": {0: {Epoch: -1, Offset: 6}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
			if err == nil {
				commitErr = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
			}
		})
	require.NoError(t, commitErr)

	var got burrowPartition
	require.Eventually(t, func() bool {
		var detail struct {
			Topics map[string][]burrowPartition `json:"topics"`
		}
		if !burrowGet(base, "/v3/kafka/local/consumer/lagtest", &detail) || len(detail.Topics["orders"]) != 1 {
			return false
		}
		got = detail.Topics["orders"][0]
		last := got.Offsets[len(got.Offsets)-1]
		return last != nil && last.Offset == 6 && got.CurrentLag == 4 && (!wantOwner || got.Owner != "")
	}, 30*time.Second, 200*time.Millisecond, "Burrow's view of lagtest: %+v", &got)
	t.Logf("Burrow, group metadata value v%d: orders[0] committed %d, current-lag %d, owner %q, client_id %q",
		v, got.Offsets[len(got.Offsets)-1].Offset, got.CurrentLag, got.Owner, got.ClientID)
	return got, readFile(t, filepath.Join(dir, "burrow.out"))
}

// readFile returns a file's contents ("" when it cannot be read).
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, _ := os.ReadFile(path)
	return string(b)
}
