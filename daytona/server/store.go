package server

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The server's records live in a bbolt database (go.etcd.io/bbolt) in the
// state dir, serve/records.db: every change is written in a transaction
// before the call that made it answers, so that a restart, or a kill -9,
// of the server loses nothing. bbolt is a single file with ACID
// transactions, pure Go (no cgo: the binary stays static), and it holds
// an exclusive lock on its file while open, which is what keeps a second
// server off the same records; the records are a few small JSON values
// per sandbox, read whole at start, for which SQL would add nothing.

// Buckets of the store. Each maps an id to the JSON of one record;
// history maps a sandbox id to a bucket of its state changes, keyed by a
// big-endian sequence number.
var (
	bucketSandboxes = []byte("sandboxes")
	bucketHistory   = []byte("history")
	bucketVolumes   = []byte("volumes")
	bucketKeys      = []byte("keys")
	bucketOrgs      = []byte("organizations")
	bucketSnapshots = []byte("snapshots") // by name
)

// storeFile is the store's path under the state dir.
const storeFile = "serve/records.db"

// maxHistory is how many state changes the store keeps per sandbox.
const maxHistory = 256

// storeLockTimeout is how long opening the store waits for another
// process holding it.
const storeLockTimeout = 200 * time.Millisecond

// ErrStoreInUse is the error (matched with errors.Is) of opening the
// records of a state dir that another process — an agentbox serve — has
// open.
var ErrStoreInUse = errors.New("the records are in use by an agentbox serve running on this state dir")

// store is the server's records on disk. Its methods are safe for
// concurrent use.
//
// Writes go through one writer goroutine, in the order they were queued
// (enqueue), and those queued meanwhile are committed together, in one
// transaction and one fsync (group commit): the server queues a record's
// write while it holds its mutex, which fixes the order of the writes of
// one record, and waits for it (storeWrite.wait) after releasing the
// mutex, before it answers — so that what a call acknowledged is on disk
// (a kill -9 loses nothing of it) while other calls go on meanwhile.
type store struct {
	db *bolt.DB

	mu     sync.Mutex
	queue  []*storeWrite
	wake   chan struct{} // holds a value when queue has writes
	closed bool          // no more writes are queued
	done   chan struct{} // closed when the writer has ended

	// trail holds the activity entries not queued yet (activitytrail.go).
	trail trailBuffer
}

// A storeWrite is one write queued to the store.
type storeWrite struct {
	fn func(tx *bolt.Tx) error
	// failed, when set, runs (in the writer) with the write's error.
	failed func(error)
	done   chan struct{} // closed once committed, or failed (err)
	err    error
}

// wait waits until w is committed and returns its error. A nil w is a
// write that was not needed: its wait returns nil at once.
func (w *storeWrite) wait() error {
	if w == nil {
		return nil
	}
	<-w.done
	return w.err
}

// errStoreClosed is the error of writes queued after the store closed.
var errStoreClosed = errors.New("agentbox serve: the records are closed")

// openStore opens (creating it if need be) the store of stateDir.
func openStore(stateDir string) (*store, error) {
	path := filepath.Join(stateDir, storeFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("agentbox serve: creating the records' folder: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: storeLockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("agentbox serve: opening %s: %w: stop it first", path, ErrStoreInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("agentbox serve: opening the records %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketSandboxes, bucketHistory, bucketVolumes, bucketKeys, bucketOrgs, bucketSnapshots, bucketWarmPools, bucketActivity, bucketActivityMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return dropOrphanTrails(tx) // activitytrail.go
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("agentbox serve: preparing the records %s: %w", path, err)
	}
	st := &store{db: db, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go st.writer()
	return st, nil
}

// close commits the writes queued (the activity trail's too), then
// closes the store's file.
func (st *store) close() error {
	st.closeTrail()
	st.mu.Lock()
	if !st.closed {
		st.closed = true
		close(st.wake)
	}
	st.mu.Unlock()
	<-st.done
	return st.db.Close()
}

// enqueue queues fn, to run in a write transaction after the writes
// queued before; failed, when not nil, is told its error.
func (st *store) enqueue(fn func(tx *bolt.Tx) error, failed func(error)) *storeWrite {
	w := &storeWrite{fn: fn, failed: failed, done: make(chan struct{})}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		w.err = errStoreClosed
		close(w.done)
		return w
	}
	st.queue = append(st.queue, w)
	select {
	case st.wake <- struct{}{}:
	default:
	}
	return w
}

// update runs fn in a write transaction, after the writes queued before,
// and returns its error.
func (st *store) update(fn func(tx *bolt.Tx) error) error { return st.enqueue(fn, nil).wait() }

// writer commits the queued writes, all those queued meanwhile in one
// transaction, until the store closes.
func (st *store) writer() {
	defer close(st.done)
	for {
		_, open := <-st.wake
		st.mu.Lock()
		batch := st.queue
		st.queue = nil
		st.mu.Unlock()
		if len(batch) > 0 {
			st.commit(batch)
		}
		if !open {
			return
		}
	}
}

// commit commits batch in one transaction; when that fails, each write
// goes on its own, so that one failing write fails alone.
func (st *store) commit(batch []*storeWrite) {
	err := st.db.Update(func(tx *bolt.Tx) error {
		for _, w := range batch {
			if err := w.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	for _, w := range batch {
		if err != nil && len(batch) > 1 {
			w.err = st.db.Update(w.fn)
		} else {
			w.err = err
		}
		if w.err != nil && w.failed != nil {
			w.failed(w.err)
		}
		close(w.done)
	}
}

// put writes v as the JSON record key of bucket.
func (st *store) put(bucket []byte, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding record %s: %w", key, err)
	}
	return st.putRaw(bucket, key, data, nil)
}

// putRaw writes data as record key of bucket and, in the same
// transaction, appends hist to the history of key.
func (st *store) putRaw(bucket []byte, key string, data []byte, hist []historyEntry) error {
	return st.putAsync(bucket, key, data, hist, nil).wait()
}

// putAsync queues the write of putRaw; failed, when not nil, is told its
// error.
func (st *store) putAsync(bucket []byte, key string, data []byte, hist []historyEntry, failed func(error)) *storeWrite {
	return st.enqueue(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucket).Put([]byte(key), data); err != nil {
			return err
		}
		if len(hist) == 0 {
			return nil
		}
		return appendHistory(tx, key, hist)
	}, failed)
}

// appendHistory appends hist to the history of sandbox id, keeping the
// last maxHistory entries.
func appendHistory(tx *bolt.Tx, id string, hist []historyEntry) error {
	b, err := tx.Bucket(bucketHistory).CreateBucketIfNotExists([]byte(id))
	if err != nil {
		return err
	}
	for _, h := range hist {
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		data, err := json.Marshal(h)
		if err != nil {
			return err
		}
		if err := b.Put(binary.BigEndian.AppendUint64(nil, seq), data); err != nil {
			return err
		}
	}
	n := 0
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	for ; n > maxHistory; n-- {
		k, _ := c.First()
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes record key of bucket (and its history and activity
// trail, for a sandbox).
func (st *store) remove(bucket []byte, key string) error {
	return st.removeAsync(bucket, key, nil).wait()
}

// removeAsync queues the write of remove; failed, when not nil, is told
// its error.
func (st *store) removeAsync(bucket []byte, key string, failed func(error)) *storeWrite {
	return st.enqueue(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucket).Delete([]byte(key)); err != nil {
			return err
		}
		if h := tx.Bucket(bucketHistory); h.Bucket([]byte(key)) != nil {
			if err := h.DeleteBucket([]byte(key)); err != nil {
				return err
			}
		}
		if string(bucket) != string(bucketSandboxes) {
			return nil
		}
		return removeActivityTx(tx, key)
	}, failed)
}

// each calls fn with every record of bucket, in key order.
func (st *store) each(bucket []byte, fn func(key string, data []byte) error) error {
	return st.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error { return fn(string(k), v) })
	})
}

// history returns the state changes of sandbox id, oldest first.
func (st *store) history(id string) ([]historyEntry, error) {
	var out []historyEntry
	err := st.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketHistory).Bucket([]byte(id))
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var h historyEntry
			if err := json.Unmarshal(v, &h); err != nil {
				return err
			}
			out = append(out, h)
			return nil
		})
	})
	return out, err
}

// historyEntry is one state change of a sandbox.
type historyEntry struct {
	State        string    `json:"state"`
	DesiredState string    `json:"desiredState"`
	ErrorReason  string    `json:"errorReason,omitempty"`
	At           time.Time `json:"at"`
}
