package main

import (
	"fmt"
	"path/filepath"
	"time"

	plog "github.com/partlog/partlog/log"
)

// remoteTiers measures tiered storage against a directory-backed store on
// the same disk: the throughput of the background copier (segments copied
// per second of wall time, from the first pass to the last copy), of reads
// from offset 0 served from the copies (cold chunk cache), and of the same
// reads served from the local segments before they were copied.
func (b *bench) remoteTiers() error {
	total := b.total / 4
	const batchSize = 64 << 10
	bs := batches(int(total/batchSize), batchSize)
	for rep := range b.reps {
		dir, err := b.freshDir(fmt.Sprintf("remote-%d", rep))
		if err != nil {
			return err
		}
		store := plog.NewDirRemoteStorage(filepath.Join(dir, "store"), nil)
		cfg := plog.DirConfig{
			Config: plog.Config{SegmentBytes: 4 << 20},
			Remote: &plog.RemoteConfig{Storage: store, LocalRetentionBytes: 1, Interval: time.Hour},
		}
		d, err := plog.OpenDir(filepath.Join(dir, "data"), cfg)
		if err != nil {
			return err
		}
		p, err := d.CreatePartition("bench", 0)
		if err != nil {
			return err
		}
		var size int64
		for _, bt := range bs {
			if _, err := p.AppendBatch(bt); err != nil {
				return err
			}
			size += int64(len(bt))
		}
		if err := p.Sync(); err != nil {
			return err
		}
		localRate, err := readRate(p, 0, p.HighWatermark())
		if err != nil {
			return err
		}
		if err := d.Close(); err != nil {
			return err
		}
		// Reopen with passes every 10ms and time the copies.
		cfg.Remote.Interval = 10 * time.Millisecond
		start := time.Now()
		if d, err = plog.OpenDir(filepath.Join(dir, "data"), cfg); err != nil {
			return err
		}
		p = d.Partition("bench", 0)
		for p.Stats().Remote.Segments == 0 || p.Stats().Remote.CopyLagSegments > 0 || p.LogStartOffset() == 0 {
			if time.Since(start) > 10*time.Minute {
				d.Close()
				return fmt.Errorf("remote: copies did not finish: %+v", p.Stats().Remote)
			}
			time.Sleep(2 * time.Millisecond)
		}
		copyTime := time.Since(start)
		rs := p.Stats().Remote
		remoteRate, err := readRate(p, 0, p.LogStartOffset())
		if err != nil {
			d.Close()
			return err
		}
		if err := d.Close(); err != nil {
			return err
		}
		emit(fmt.Sprintf("remote_copy_MBps[rep=%d,segments=%d]", rep, rs.Segments), float64(rs.CopiedBytes)/copyTime.Seconds()/1e6, "MB/s")
		emit(fmt.Sprintf("remote_read_MBps[rep=%d]", rep), remoteRate, "MB/s")
		emit(fmt.Sprintf("local_read_MBps[rep=%d]", rep), localRate, "MB/s")
	}
	return nil
}

// readRate reads [from, to) with ReadFrom of 1 MiB and returns MB/s.
func readRate(p *plog.Partition, from, to int64) (float64, error) {
	start := time.Now()
	var n int64
	for next := from; next < to; {
		r, err := p.ReadFrom(next, 1<<20)
		if err != nil {
			return 0, err
		}
		n += int64(len(r.Bytes()))
		next = r.NextOffset()
		if err := r.Close(); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds() / 1e6, nil
}
