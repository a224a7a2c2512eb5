// Package weedtest starts a SeaweedFS server (weed: master, volume, filer
// and S3 gateway in one process) on loopback for tests of S3 remote
// storage: log/s3remote's and the broker example's. The binary is
// $PARTLOG_WEED, else weed on PATH; without one the tests skip, or fail
// when CI is set. $PARTLOG_S3_LATER skips them (.ci/run runs them in its
// last step, once its build of weed is done).
package weedtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/s3remote"
)

// The bucket and static credentials of the stores Server.Store returns
// (SeaweedFS without an identity configuration accepts any).
const (
	Bucket    = "partlog-test"
	AccessKey = "partlog"
	SecretKey = "partlog-secret"
)

// warmup is the partition of the object Start writes to wait for the
// server's first volume allocation.
var warmup = plog.TopicPartition{Topic: "warmup", Partition: 0}

// EnvBinary names the SeaweedFS binary the tests start (.ci/run builds it
// and sets it); without it they look for "weed" on PATH.
const EnvBinary = "PARTLOG_WEED"

// EnvLater, when set, skips the tests that need SeaweedFS (.ci/run sets it
// for the README's test command, which runs while the server still builds).
const EnvLater = "PARTLOG_S3_LATER"

// Binary returns the path of the weed binary, skipping t when there is
// none (failing it when CI is set: CI must run these tests).
func Binary(t testing.TB) string {
	t.Helper()
	if os.Getenv(EnvLater) != "" {
		t.Skip(EnvLater + " is set: .ci/run runs the tests that need SeaweedFS in a later step, once its build is done")
	}
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", EnvBinary, p, err)
		}
		return p
	}
	if p, err := exec.LookPath("weed"); err == nil {
		return p
	}
	msg := "no SeaweedFS binary: set " + EnvBinary + " or put weed on PATH (.ci/run builds it)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "; CI is set, so the S3 tests cannot be skipped")
	}
	t.Skip(msg)
	return ""
}

// Server is a SeaweedFS server (master, volume, filer and S3 gateway in
// one process) on loopback, with its data in a test's temporary directory.
type Server struct {
	t      testing.TB
	bin    string
	dir    string
	ports  map[string]int // by flag name: "s3.port", "s3.port.grpc", ...
	cmd    *exec.Cmd
	exited chan struct{}
	out    *bytes.Buffer
}

// freePorts returns n distinct loopback TCP ports nobody listens on now.
// Each listener stays open until all n are taken: closed one at a time,
// the kernel may hand the same port out twice (once it gave the volume
// server's port to the S3 gateway's gRPC listener, and weed exited).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// Start starts a SeaweedFS server and waits until its S3 gateway
// creates the bucket; the server stops when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	w := &Server{t: t, bin: Binary(t), dir: t.TempDir(), ports: map[string]int{}}
	names := []string{"master", "volume", "filer", "s3"}
	ports := freePorts(t, 2*len(names))
	for i, name := range names {
		w.ports[name+".port"] = ports[2*i]
		w.ports[name+".port.grpc"] = ports[2*i+1]
	}
	t.Cleanup(w.Stop)
	w.Start()
	return w
}

// Endpoint returns the S3 gateway's host:port.
func (w *Server) Endpoint() string {
	return "127.0.0.1:" + strconv.Itoa(w.ports["s3.port"])
}

// Start runs the server on w's ports and directory and waits, at most a
// minute, until the S3 gateway answers a bucket creation.
func (w *Server) Start() {
	t := w.t
	t.Helper()
	// 64 MB volumes, as many as the disk holds (-volume.max=0): a fixed
	// count caps what a test can store (4 of them failed the copies of a
	// 300 MiB run); a 1 s election timeout for the one master (with the
	// default 10 s a restart waited 34 s for its leader, 19 s with 1 s);
	// iceberg and lance gateways off.
	args := []string{"server", "-dir=" + w.dir, "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-s3",
		"-volume.max=0", "-master.volumeSizeLimitMB=64", "-master.electionTimeout=1s", "-volume.preStopSeconds=0",
		"-s3.port.iceberg=0", "-s3.port.lance=0"}
	for name, port := range w.ports {
		args = append(args, fmt.Sprintf("-%s=%d", name, port))
	}
	w.out = &bytes.Buffer{}
	w.cmd = exec.Command(w.bin, args...)
	w.cmd.Dir = w.dir
	w.cmd.Stdout = w.out
	w.cmd.Stderr = w.out
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, w.cmd.Start())
	w.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(w.cmd, w.exited)

	st := w.Store(t, "")
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := st.CreateBucket(ctx)
		if err == nil {
			// The first write makes the server allocate volumes, which
			// takes seconds on a loaded machine: wait for it here.
			err = st.CopySegment(ctx, plog.RemoteSegmentMetadata{ID: plog.NewRemoteSegmentID(warmup), Size: 1},
				plog.RemoteSegmentData{Segment: bytes.NewReader([]byte{1})})
		}
		cancel()
		if err == nil {
			return
		}
		select {
		case <-w.exited:
			t.Fatalf("weed server exited while starting: %v\n%s", w.cmd.ProcessState, w.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("weed S3 gateway on %s not ready within a minute: %v\n%s", w.Endpoint(), err, w.out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 3 seconds: with a
// fetch open it waited the whole 20 seconds it was given before) and waits
// for its process group to exit.
func (w *Server) Stop() {
	if w.cmd == nil {
		return
	}
	pgid := w.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-w.exited:
	case <-time.After(3 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-w.exited
	}
	w.cmd = nil
}

// Store returns a Store of the test bucket on w with short timeouts, its
// keys under prefix.
func (w *Server) Store(t testing.TB, prefix string) *s3remote.Store {
	t.Helper()
	st, err := NewStore(w.Endpoint(), prefix)
	require.NoError(t, err)
	return st
}

// NewStore returns a Store of the test bucket on the server at endpoint
// (Server.Endpoint) with short timeouts, its keys under prefix: what a
// child process of a test builds to reach its parent's server.
func NewStore(endpoint, prefix string) (*s3remote.Store, error) {
	return s3remote.New(s3remote.Config{
		Endpoint:        endpoint,
		Bucket:          Bucket,
		Prefix:          prefix,
		AccessKeyID:     AccessKey,
		SecretAccessKey: SecretKey,
		RequestTimeout:  10 * time.Second,
		MaxRetries:      1,
		PartSize:        5 << 20,
	})
}
