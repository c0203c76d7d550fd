package sqs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// Redrive. sluice dead-letters a message into its queue's own dead-letter
// queue; SQS moves it to another queue, its RedrivePolicy's target. The
// endpoint joins the two: a queue's RedrivePolicy sets its
// MaxDeliveryCount to maxReceiveCount and names the target, and the
// target, as SQS shows it, holds its own messages and the dead letters of
// every queue whose policy names it (its sources). They are received,
// deleted and counted as the target's; StartMessageMoveTask resubmits
// them to their sources.

// redrivePolicy is a queue's RedrivePolicy, as its settings keep it.
type redrivePolicy struct {
	Target          string `json:"target"` // canonical
	MaxReceiveCount int    `json:"maxReceiveCount"`
}

// maxMaxReceiveCount bounds maxReceiveCount, as SQS does.
const maxMaxReceiveCount = 1000

// parseRedrive reads a RedrivePolicy attribute ("" removes the policy).
func parseRedrive(v string) (*redrivePolicy, error) {
	if v == "" {
		return nil, nil
	}
	var raw struct {
		DeadLetterTargetArn string          `json:"deadLetterTargetArn"`
		MaxReceiveCount     json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		return nil, invalidAttributeValue("RedrivePolicy is not a JSON object of deadLetterTargetArn and maxReceiveCount: %v", err)
	}
	n, err := strconv.Atoi(strings.Trim(string(raw.MaxReceiveCount), `"`))
	if err != nil || n < 1 || n > maxMaxReceiveCount {
		return nil, invalidAttributeValue("RedrivePolicy: maxReceiveCount %s must be from 1 to %d", truncate(string(raw.MaxReceiveCount), 20), maxMaxReceiveCount)
	}
	target, err := nameFromARN(raw.DeadLetterTargetArn)
	if err != nil {
		return nil, err
	}
	return &redrivePolicy{Target: target, MaxReceiveCount: n}, nil
}

// nameFromARN returns the canonical name of the queue an SQS ARN names
// (arn:aws:sqs:region:account:name; any region and account).
func nameFromARN(arn string) (string, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" {
		return "", invalidParameter("%q is not a queue's ARN (arn:aws:sqs:region:account:name)", truncate(arn, 200))
	}
	if err := checkName(parts[5]); err != nil {
		return "", err
	}
	return sluice.CanonicalName(parts[5]), nil
}

// sourceQueue is the queue a move task's SourceArn names, once the key is
// found to hold p on it.
func (rq *request) sourceQueue(arn string, p Permission) (string, error) {
	if arn == "" {
		return "", missingParameter("SourceArn")
	}
	name, err := nameFromARN(arn)
	if err != nil {
		return "", err
	}
	return name, rq.authorize(p, name)
}

// redriveJSON is a policy as GetQueueAttributes shows it.
func (rq *request) redriveJSON(p *redrivePolicy) string {
	b, _ := json.Marshal(struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     int    `json:"maxReceiveCount"`
	}{rq.arn(p.Target), p.MaxReceiveCount})
	return string(b)
}

// checkRedrive checks q's policy against its target, which must exist,
// be another queue that the request's key may send to (its dead letters
// go there), and be FIFO exactly when q is, and keeps q's dead letters as
// long as the target keeps messages.
func (h *Handler) checkRedrive(ctx context.Context, rq *request, q *queue) error {
	p := q.sqs.Redrive
	if p == nil {
		q.props.MaxDeliveryCount = noRedrive
		return nil
	}
	if p.Target == q.name {
		return invalidAttributeValue("RedrivePolicy: a queue cannot be its own dead-letter queue")
	}
	if err := rq.authorize(Send, p.Target); err != nil {
		return err
	}
	target, err := h.lookup(ctx, p.Target)
	if err != nil {
		return invalidAttributeValue("RedrivePolicy: the dead-letter target %q does not exist", p.Target)
	}
	if target.fifo() != q.fifo() {
		return invalidAttributeValue("RedrivePolicy: the dead-letter queue of a FIFO queue must be a FIFO queue, and of a standard queue a standard one")
	}
	q.props.MaxDeliveryCount = p.MaxReceiveCount
	q.props.DeadLetterRetention = target.props.DefaultTTL
	return nil
}

// noRedrive is the MaxDeliveryCount of a queue without a RedrivePolicy:
// SQS never dead-letters its messages.
const noRedrive = 1<<31 - 1

// redriveIndex maps each dead-letter target to its sources, read from
// every queue's settings at most every redriveIndexTTL, and again after a
// change of a RedrivePolicy through this node. One read runs at a time;
// while it runs, other callers get the index it replaces.
type redriveIndex struct {
	mu      sync.Mutex
	read    time.Time
	sources map[string][]string
	loading chan struct{} // closed when the read in progress ends
}

const redriveIndexTTL = 2 * time.Second

// sources returns the queues whose RedrivePolicy names target, in name
// order.
func (h *Handler) sources(ctx context.Context, target string) ([]string, error) {
	x := &h.redrive
	x.mu.Lock()
	for {
		if x.sources != nil && (time.Since(x.read) < redriveIndexTTL || x.loading != nil) {
			srcs := x.sources[target]
			x.mu.Unlock()
			return srcs, nil
		}
		if x.loading == nil {
			break
		}
		loading := x.loading // the first read: wait for it
		x.mu.Unlock()
		select {
		case <-loading:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		x.mu.Lock()
	}
	loading := make(chan struct{})
	x.loading = loading
	x.mu.Unlock()
	m, err := h.readRedrive(ctx)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.loading = nil
	close(loading)
	if err != nil {
		return nil, err
	}
	x.sources, x.read = m, time.Now()
	return m[target], nil
}

// readRedrive reads every queue's RedrivePolicy.
func (h *Handler) readRedrive(ctx context.Context) (map[string][]string, error) {
	m := map[string][]string{}
	for after := ""; ; {
		page, err := h.c.ListQueuesWithPrefix(ctx, "", after, maxListed)
		if err != nil {
			return nil, err
		}
		for _, info := range page {
			if q := load(info); q.sqs.Redrive != nil {
				m[q.sqs.Redrive.Target] = append(m[q.sqs.Redrive.Target], q.name)
			}
		}
		if len(page) < maxListed {
			return m, nil
		}
		after = page[len(page)-1].Name
	}
}

// forgetRedrive makes the next sources read every queue again.
func (h *Handler) forgetRedrive() {
	h.redrive.mu.Lock()
	h.redrive.read = time.Time{}
	h.redrive.mu.Unlock()
}

// isSource reports whether source's dead letters are target's.
func (h *Handler) isSource(ctx context.Context, target, source string) (bool, error) {
	srcs, err := h.sources(ctx, target)
	return slices.Contains(srcs, source), err
}

type listSourcesInput struct {
	QueueUrl   string
	NextToken  string
	MaxResults *int
}

type listSourcesOutput struct {
	QueueUrls []string `json:"queueUrls"`
	NextToken string   `json:",omitempty"`
}

func (h *Handler) listDeadLetterSourceQueues(ctx context.Context, rq *request, body []byte) (any, error) {
	var in listSourcesInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, err := h.queue(ctx, rq, in.QueueUrl, 0)
	if err != nil {
		return nil, err
	}
	srcs, err := h.sources(ctx, q.name)
	if err != nil {
		return nil, err
	}
	max, err := intParam("MaxResults", in.MaxResults, maxListed, 1, maxListed)
	if err != nil {
		return nil, err
	}
	out := listSourcesOutput{QueueUrls: []string{}}
	last := ""
	for _, s := range srcs {
		if s <= in.NextToken || rq.key != nil && !rq.key.Allows(0, s) {
			continue // before the page, or not the key's to see
		}
		if len(out.QueueUrls) == max {
			out.NextToken = last
			break
		}
		out.QueueUrls, last = append(out.QueueUrls, rq.url(s)), s
	}
	return out, nil
}

// Message move tasks. A task runs on the node that started it, in the
// background, and is known to that node only: ListMessageMoveTasks and
// CancelMessageMoveTask find it there.

type moveTask struct {
	handle      string
	source      string // the dead-letter queue, as SQS names a task's source
	sourceARN   string
	rate        int // messages a second (0: as fast as batches go)
	started     time.Time
	cancel      context.CancelFunc
	done        chan struct{}
	mu          sync.Mutex
	status      string
	moved, toGo int64
	failure     string
}

type moveTasks struct {
	mu      sync.Mutex
	tasks   []*moveTask // newest last; finished ones are kept, up to maxKeptTasks
	n       int
	running sync.WaitGroup
}

const maxKeptTasks = 100

// maxMoveRate bounds MaxNumberOfMessagesPerSecond, as SQS does.
const maxMoveRate = 500

type startMoveInput struct {
	SourceArn                    string
	DestinationArn               string
	MaxNumberOfMessagesPerSecond *int
}

type startMoveOutput struct {
	TaskHandle string
}

func (h *Handler) startMessageMoveTask(ctx context.Context, rq *request, body []byte) (any, error) {
	var in startMoveInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	name, err := rq.sourceQueue(in.SourceArn, Manage)
	if err != nil {
		return nil, err
	}
	if _, err := h.lookup(ctx, name); err != nil {
		return nil, resourceNotFound("the source queue %q does not exist", name)
	}
	srcs, err := h.sources(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(srcs) == 0 {
		return nil, invalidParameter("queue %q is no queue's dead-letter queue: no RedrivePolicy names it", name)
	}
	if in.DestinationArn != "" {
		return nil, unsupported("DestinationArn: this endpoint moves dead letters back to the queues they came from only (leave it out)")
	}
	for _, s := range srcs {
		if err := rq.authorize(Send, s); err != nil {
			return nil, err
		}
	}
	rate, err := intParam("MaxNumberOfMessagesPerSecond", in.MaxNumberOfMessagesPerSecond, 0, 1, maxMoveRate)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, s := range srcs {
		st, err := h.c.GetQueueStats(ctx, s)
		if err != nil {
			return nil, err
		}
		total += st.DeadLettered
	}
	h.moves.mu.Lock()
	defer h.moves.mu.Unlock()
	for _, t := range h.moves.tasks {
		if t.source == name && t.state() == "RUNNING" {
			return nil, invalidParameter("a message move task of queue %q is running already (one at a time, as in SQS)", name)
		}
	}
	h.moves.n++
	tctx, cancel := context.WithCancel(h.cfg.Context)
	t := &moveTask{handle: fmt.Sprintf("%s-%d-%d", name, time.Now().UnixMilli(), h.moves.n), source: name, sourceARN: rq.arn(name),
		rate: rate, started: time.Now(), cancel: cancel, done: make(chan struct{}), status: "RUNNING", toGo: total}
	h.moves.tasks = append(h.moves.tasks, t)
	for i := 0; len(h.moves.tasks) > maxKeptTasks && i < len(h.moves.tasks); {
		if h.moves.tasks[i].state() == "RUNNING" {
			i++
			continue
		}
		h.moves.tasks = slices.Delete(h.moves.tasks, i, i+1) // the oldest finished first
	}
	h.moves.running.Go(func() { h.move(tctx, t, srcs) })
	return startMoveOutput{TaskHandle: t.handle}, nil
}

// Wait waits for the message move tasks to end: they end once
// Config.Context does.
func (h *Handler) Wait() { h.moves.running.Wait() }

func (t *moveTask) state() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status
}

// move resubmits each source's dead letters to it, a batch a second at
// the task's rate.
func (h *Handler) move(ctx context.Context, t *moveTask, srcs []string) {
	defer close(t.done)
	defer t.cancel()
	batch := sluice.MaxPeek
	if t.rate > 0 {
		batch = min(batch, t.rate)
	}
	var err error
	for _, s := range srcs {
		if err = h.moveSource(ctx, t, s, batch); err != nil {
			break
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.status == "CANCELLING":
		t.status = "CANCELLED"
	case err != nil:
		t.status, t.failure = "FAILED", err.Error()
		h.log.Error("sluice: sqs: a message move task failed", "task", t.handle, "err", err)
	default:
		t.status = "COMPLETED"
	}
}

// moveSource moves one source's dead letters, as many as there were
// when it began. It locks each batch first, as a receive of the
// dead-letter queue would, so that it moves none that a receiver of the
// dead-letter queue holds (and would delete after the move).
func (h *Handler) moveSource(ctx context.Context, t *moveTask, source string, batch int) error {
	r, err := h.c.NewReceiver(source, &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter, LockDuration: moveLock})
	if err != nil {
		return err
	}
	st, err := h.c.GetQueueStats(ctx, source)
	if err != nil {
		return err
	}
	for left := st.DeadLettered; left > 0; {
		began := time.Now()
		held, err := r.TryReceive(ctx, int(min(int64(batch), left)))
		if err != nil || len(held) == 0 {
			return err // none left that no one holds
		}
		left -= int64(len(held))
		seqs := make([]int64, len(held))
		for i, m := range held {
			seqs[i] = m.SequenceNumber
		}
		n, err := h.c.ResubmitDeadLetters(ctx, source, &sluice.ResubmitOptions{SequenceNumbers: seqs})
		if err != nil {
			return err // the batch's locks end, and its dead letters stay
		}
		t.mu.Lock()
		t.moved += int64(n)
		t.mu.Unlock()
		if t.rate > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Until(began.Add(time.Duration(len(seqs)) * time.Second / time.Duration(t.rate)))):
			}
		}
	}
	return nil
}

// moveLock is how long a move task holds a batch of dead letters while
// it moves them.
const moveLock = time.Minute

type listMovesInput struct {
	SourceArn  string
	MaxResults *int
}

type moveResult struct {
	TaskHandle                        string `json:",omitempty"`
	Status                            string
	SourceArn                         string
	MaxNumberOfMessagesPerSecond      int `json:",omitempty"`
	ApproximateNumberOfMessagesMoved  int64
	ApproximateNumberOfMessagesToMove int64
	FailureReason                     string `json:",omitempty"`
	StartedTimestamp                  int64
}

type listMovesOutput struct {
	Results []moveResult
}

func (h *Handler) listMessageMoveTasks(ctx context.Context, rq *request, body []byte) (any, error) {
	var in listMovesInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	name, err := rq.sourceQueue(in.SourceArn, 0)
	if err != nil {
		return nil, err
	}
	max, err := intParam("MaxResults", in.MaxResults, 1, 1, 10)
	if err != nil {
		return nil, err
	}
	out := listMovesOutput{Results: []moveResult{}}
	h.moves.mu.Lock()
	defer h.moves.mu.Unlock()
	for i := len(h.moves.tasks) - 1; i >= 0 && len(out.Results) < max; i-- {
		t := h.moves.tasks[i]
		if t.source != name {
			continue
		}
		t.mu.Lock()
		r := moveResult{Status: t.status, SourceArn: t.sourceARN, MaxNumberOfMessagesPerSecond: t.rate,
			ApproximateNumberOfMessagesMoved: t.moved, ApproximateNumberOfMessagesToMove: t.toGo, FailureReason: t.failure,
			StartedTimestamp: t.started.UnixMilli()}
		if t.status == "RUNNING" {
			r.TaskHandle = t.handle
		}
		t.mu.Unlock()
		out.Results = append(out.Results, r)
	}
	return out, nil
}

type cancelMoveInput struct {
	TaskHandle string
}

type cancelMoveOutput struct {
	ApproximateNumberOfMessagesMoved int64
}

func (h *Handler) cancelMessageMoveTask(ctx context.Context, rq *request, body []byte) (any, error) {
	var in cancelMoveInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	h.moves.mu.Lock()
	var t *moveTask
	for _, c := range h.moves.tasks {
		if c.handle == in.TaskHandle {
			t = c
		}
	}
	h.moves.mu.Unlock()
	if t == nil || rq.authorize(Manage, t.source) != nil {
		return nil, resourceNotFound("no message move task that the key may cancel has the handle %q on this node", truncate(in.TaskHandle, 100))
	}
	t.mu.Lock()
	if t.status != "RUNNING" {
		t.mu.Unlock()
		return nil, resourceNotFound("the message move task %q is not running", in.TaskHandle)
	}
	t.status = "CANCELLING"
	t.mu.Unlock()
	t.cancel()
	select {
	case <-t.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return cancelMoveOutput{ApproximateNumberOfMessagesMoved: t.moved}, nil
}
