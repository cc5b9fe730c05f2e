package audit

import "sync"

// maxQueued is how many records may wait for the writer: a producer
// that would queue more waits until the writer has written a batch, so a
// slow sink slows the turns down instead of growing the queue.
const maxQueued = 4096

// queue holds the records handed to a Log's writer, in order. The writer
// is a goroutine that runs while the queue holds records and exits when
// it is empty, so an idle Log holds none.
type queue struct {
	qmu sync.Mutex
	// done is signalled whenever the writer has written a batch.
	done    sync.Cond
	pending []queued
	spare   []queued
	writing bool
	// posted and written count the records handed over and written.
	posted, written uint64
}

type queued struct {
	kind string
	v    any
}

func (q *queue) init() { q.done.L = &q.qmu }

// post hands one record to the writer and returns its number, for wait.
func (l *Log) post(kind string, v any) uint64 {
	q := &l.queue
	q.qmu.Lock()
	for len(q.pending) >= maxQueued {
		q.done.Wait()
	}
	q.pending = append(q.pending, queued{kind, v})
	q.posted++
	n := q.posted
	if !q.writing {
		q.writing = true
		go l.drain()
	}
	q.qmu.Unlock()
	return n
}

// wait returns when record n has been written.
func (l *Log) wait(n uint64) {
	q := &l.queue
	q.qmu.Lock()
	for q.written < n {
		q.done.Wait()
	}
	q.qmu.Unlock()
}

// Flush returns when every record handed over before it is written.
func (l *Log) Flush() {
	l.queue.qmu.Lock()
	n := l.queue.posted
	l.queue.qmu.Unlock()
	l.wait(n)
}

// drain is the writer: it writes the queue's records in batches until
// the queue is empty.
func (l *Log) drain() {
	q := &l.queue
	for {
		q.qmu.Lock()
		batch := q.pending
		if len(batch) == 0 {
			q.writing = false
			q.qmu.Unlock()
			return
		}
		q.pending = q.spare[:0]
		q.qmu.Unlock()
		for i := range batch {
			l.writeLine(batch[i].kind, batch[i].v)
			batch[i] = queued{}
		}
		q.qmu.Lock()
		q.spare = batch[:0]
		q.written += uint64(len(batch))
		q.done.Broadcast()
		q.qmu.Unlock()
	}
}
