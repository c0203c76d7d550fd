package sqs

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

type receiveMessageInput struct {
	QueueUrl                    string
	AttributeNames              []string
	MessageSystemAttributeNames []string
	MessageAttributeNames       []string
	MaxNumberOfMessages         *int
	VisibilityTimeout           *int
	WaitTimeSeconds             *int
	ReceiveRequestAttemptId     string
}

type message struct {
	MessageId              string
	ReceiptHandle          string
	MD5OfBody              string
	Body                   string
	Attributes             map[string]string         `json:",omitempty"`
	MD5OfMessageAttributes string                    `json:",omitempty"`
	MessageAttributes      map[string]attributeValue `json:",omitempty"`
}

type receiveMessageOutput struct {
	Messages []message `json:",omitempty"`
}

// systemAttributes are the message system attributes a receive may ask
// for; those a message of this endpoint has are answered.
var systemAttributes = []string{"All", "SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
	"SequenceNumber", "MessageDeduplicationId", "MessageGroupId", "AWSTraceHeader", "DeadLetterQueueSourceArn"}

// maxNames bounds the attribute names a receive asks for, of each kind.
const maxNames = 100

// receipt is a received message with the handle its caller gets, and
// for a dead letter the queue it came from.
type receipt struct {
	m      *sluice.ReceivedMessage
	handle handle
}

func (h *Handler) receiveMessage(ctx context.Context, rq *request, body []byte) (any, error) {
	var in receiveMessageInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	max, err := intParam("MaxNumberOfMessages", in.MaxNumberOfMessages, 1, 1, maxReceiveMessages)
	if err != nil {
		return nil, err
	}
	names := append(slices.Clone(in.AttributeNames), in.MessageSystemAttributeNames...)
	if len(names) > maxNames || len(in.MessageAttributeNames) > maxNames {
		return nil, invalidParameter("a receive asks for at most %d names of attributes of each kind", maxNames)
	}
	for _, a := range names {
		if !slices.Contains(systemAttributes, a) {
			return nil, invalidAttributeName("unknown message system attribute %q", truncate(a, 100))
		}
	}
	for _, a := range in.MessageAttributeNames {
		if a != "All" && a != ".*" && checkAttributeName(strings.TrimSuffix(a, ".*")) != nil {
			return nil, invalidAttributeName("MessageAttributeNames: %q is not an attribute name, a prefix ending in .*, All or .*", truncate(a, 100))
		}
	}
	if len(in.ReceiveRequestAttemptId) > 128 {
		return nil, invalidParameter("ReceiveRequestAttemptId is at most 128 characters")
	}
	q, err := h.queue(ctx, rq, in.QueueUrl, Receive)
	if err != nil {
		return nil, err
	}
	visibility, err := intParam("VisibilityTimeout", in.VisibilityTimeout, q.sqs.VisibilityTimeout, 0, maxVisibility)
	if err != nil {
		return nil, err
	}
	wait, err := intParam("WaitTimeSeconds", in.WaitTimeSeconds, q.sqs.ReceiveWait, 0, maxWait)
	if err != nil {
		return nil, err
	}
	attempt := ""
	if q.fifo() && in.ReceiveRequestAttemptId != "" {
		attempt = q.name + "\x00" + rq.accessKey + "\x00" + in.ReceiveRequestAttemptId
		if out, ok := h.attempts.get(attempt); ok {
			return out, nil // a retry: the same messages, the same handles
		}
	}
	srcs, err := h.sources(ctx, q.name)
	if err != nil {
		return nil, err
	}
	wctx, cancel, err := h.wait(ctx, rq, time.Duration(wait)*time.Second)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var got []receipt
	if q.fifo() {
		got, err = h.receiveGroup(ctx, wctx, q, srcs, max, lockFor(visibility))
	} else {
		got, err = h.receive(ctx, wctx, q, srcs, max, lockFor(visibility), true)
	}
	if err != nil {
		h.forgetMissing(q.name, err)
		return nil, err
	}
	out := receiveMessageOutput{Messages: make([]message, 0, len(got))}
	for _, r := range got {
		out.Messages = append(out.Messages, rq.received(q, r, names, in.MessageAttributeNames))
	}
	if attempt != "" && len(out.Messages) > 0 {
		h.attempts.put(attempt, out, min(attemptTTL, lockFor(visibility)))
	}
	return out, nil
}

// attempts remember the answers of FIFO receives by their
// ReceiveRequestAttemptId, so that a receive the SDK tries again gets
// the messages the first try locked, as SQS gives them: for five minutes
// at most, and no longer than their visibility timeout. They are kept on
// the node that answered, which a retry usually reaches.
type attempts struct {
	mu sync.Mutex
	m  map[string]attemptAnswer
}

type attemptAnswer struct {
	out     receiveMessageOutput
	expires time.Time
}

// attemptTTL is how long SQS keeps a ReceiveRequestAttemptId; maxAttempts
// bounds those a node keeps.
const (
	attemptTTL  = 5 * time.Minute
	maxAttempts = 10000
)

func (a *attempts) get(key string) (receiveMessageOutput, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ans, ok := a.m[key]
	if !ok || time.Now().After(ans.expires) {
		return receiveMessageOutput{}, false
	}
	return ans.out, true
}

func (a *attempts) put(key string, out receiveMessageOutput, ttl time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if a.m == nil {
		a.m = make(map[string]attemptAnswer)
	}
	if len(a.m) >= maxAttempts {
		maps.DeleteFunc(a.m, func(_ string, ans attemptAnswer) bool { return now.After(ans.expires) })
		if len(a.m) >= maxAttempts {
			return // a retry then receives anew, as without an attempt id
		}
	}
	a.m[key] = attemptAnswer{out: out, expires: now.Add(ttl)}
}

// lockFor is the lock of a receive whose visibility timeout is seconds:
// SQS's 0, visible again at once, is sluice's shortest lock.
func lockFor(seconds int) time.Duration {
	if seconds == 0 {
		return time.Millisecond
	}
	return time.Duration(seconds) * time.Second
}

// wait bounds a long poll (none for a short one: a receive tries once).
func (h *Handler) wait(ctx context.Context, rq *request, d time.Duration) (context.Context, context.CancelFunc, error) {
	if d == 0 || h.cfg.Wait == nil {
		ctx, cancel := context.WithTimeout(ctx, d)
		return ctx, cancel, nil
	}
	return h.cfg.Wait(ctx, rq.key, d)
}

// deadLetterPoll is how often a long poll of a dead-letter queue asks its
// sources for dead letters: no send wakes it for those.
const deadLetterPoll = 250 * time.Millisecond

// receive takes up to max messages of a standard queue, and, when it is
// a dead-letter queue, of its sources' dead letters, waiting while wctx
// lasts for some to come. Without own it takes dead letters only (a FIFO
// queue's own messages come through its groups).
func (h *Handler) receive(ctx, wctx context.Context, q queue, srcs []string, max int, lock time.Duration, own bool) ([]receipt, error) {
	r, err := h.c.NewReceiver(q.name, &sluice.ReceiverOptions{LockDuration: lock})
	if err != nil {
		return nil, err
	}
	if len(srcs) == 0 {
		if wctx.Err() != nil { // a short poll
			ms, err := r.TryReceive(ctx, max)
			return plain(ms), err
		}
		ms, err := r.Receive(wctx, max)
		return plain(ms), ended(ctx, err)
	}
	dead := make([]*sluice.Receiver, len(srcs))
	for i, s := range srcs {
		if dead[i], err = h.c.NewReceiver(s, &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter, LockDuration: lock}); err != nil {
			return nil, err
		}
	}
	for {
		if own {
			ms, err := r.TryReceive(ctx, max)
			if len(ms) > 0 || err != nil {
				return plain(ms), err
			}
		}
		for i, d := range dead {
			ms, err := d.TryReceive(ctx, max)
			if errors.Is(err, sluice.ErrEntityNotFound) {
				continue // a source deleted since the index was read
			}
			if len(ms) > 0 || err != nil {
				out := make([]receipt, len(ms))
				for j, m := range ms {
					out[j] = receipt{m: m, handle: handle{Token: m.LockToken, Source: srcs[i]}}
				}
				return out, err
			}
		}
		if wctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Wait a while: for the queue's own sends, which wake it, or for
		// dead letters, which do not.
		pctx, cancel := context.WithTimeout(wctx, deadLetterPoll)
		if own {
			ms, err := r.Receive(pctx, max)
			cancel()
			if len(ms) > 0 {
				return plain(ms), nil
			}
			if err := ended(ctx, err); err != nil {
				return nil, err
			}
			continue
		}
		<-pctx.Done()
		cancel()
	}
}

// plain is a standard queue's messages with their handles.
func plain(ms []*sluice.ReceivedMessage) []receipt {
	out := make([]receipt, len(ms))
	for i, m := range ms {
		out[i] = receipt{m: m, handle: handle{Token: m.LockToken}}
	}
	return out
}

// ended is a receive's error, nil when only its wait ended (the
// request's own end is an error still).
func ended(ctx context.Context, err error) error {
	if ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

// receiveGroup takes up to max messages of one group of a FIFO queue:
// it locks the group (the session) for the receive's visibility timeout,
// so that no other receive gets the group's messages until these are
// deleted or visible again. A FIFO dead-letter queue's sources' dead
// letters are taken as a standard queue's, when no group has messages.
func (h *Handler) receiveGroup(ctx, wctx context.Context, q queue, srcs []string, max int, lock time.Duration) ([]receipt, error) {
	for {
		actx, cancel := wctx, context.CancelFunc(func() {})
		if len(srcs) > 0 {
			actx, cancel = context.WithTimeout(wctx, deadLetterPoll)
		}
		s, err := h.c.AcceptNextSession(actx, q.name, &sluice.ReceiverOptions{LockDuration: lock})
		cancel()
		if err == nil {
			ms, err := s.TryReceive(ctx, max)
			if len(ms) == 0 {
				// Its messages went to another receive meanwhile.
				_ = s.Close(context.WithoutCancel(ctx))
				if err != nil || wctx.Err() != nil {
					return nil, err
				}
				continue
			}
			seqs := make([]int64, len(ms))
			for i, m := range ms {
				seqs[i] = m.SequenceNumber
			}
			out := make([]receipt, len(ms))
			for i, m := range ms {
				out[i] = receipt{m: m, handle: handle{Token: m.LockToken, Group: s.SessionID(), SessionToken: s.LockToken(), Seqs: seqs}}
			}
			return out, err
		}
		if err := ended(ctx, err); err != nil && !errors.Is(err, sluice.ErrNoSessionAvailable) {
			return nil, err
		}
		if len(srcs) > 0 {
			once, cancel := context.WithTimeout(ctx, 0)
			got, err := h.receive(ctx, once, q, srcs, max, lock, false)
			cancel()
			if len(got) > 0 || err != nil {
				return got, err
			}
		}
		if wctx.Err() != nil {
			return nil, nil
		}
	}
}

// received is a received message as SQS shows it, with the system
// attributes and message attributes asked for.
func (rq *request) received(q queue, r receipt, system, wanted []string) message {
	m := r.m
	out := message{MessageId: messageID(cmp.Or(r.handle.Source, q.name), m), ReceiptHandle: r.handle.String(), Body: string(m.Body),
		MD5OfBody: bodyMD5(string(m.Body))}
	all := slices.Contains(system, "All")
	want := func(a string) bool { return all || slices.Contains(system, a) }
	attrs := map[string]string{}
	set := func(a, v string) {
		if v != "" && want(a) {
			attrs[a] = v
		}
	}
	set("SenderId", cmp.Or(m.ApplicationProperties[propSenderID], "sluice"))
	set("SentTimestamp", strconv.FormatInt(m.EnqueuedTime.UnixMilli(), 10))
	set("ApproximateReceiveCount", strconv.Itoa(m.DeliveryCount))
	set("MessageGroupId", cmp.Or(m.ApplicationProperties[propGroupID], m.SessionID))
	set("MessageDeduplicationId", m.ApplicationProperties[propDedupID])
	set("AWSTraceHeader", m.ApplicationProperties[propTraceHeader])
	if r.handle.Group != "" {
		set("SequenceNumber", strconv.FormatInt(m.SequenceNumber, 10))
	}
	if r.handle.Source != "" {
		set("DeadLetterQueueSourceArn", rq.arn(r.handle.Source))
	}
	if len(attrs) > 0 {
		out.Attributes = attrs
	}
	ma := map[string]attributeValue{}
	for name, v := range m.ApplicationProperties {
		if strings.HasPrefix(name, propPrefix) || !attributeWanted(name, wanted) || checkAttributeName(name) != nil {
			continue
		}
		a := attributeValue{DataType: cmp.Or(m.ApplicationProperties[propType+name], "String")}
		if a.binary() {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				continue
			}
			a.BinaryValue = b
		} else {
			a.StringValue = &v
		}
		ma[name] = a
	}
	if len(ma) > 0 {
		out.MessageAttributes = ma
		out.MD5OfMessageAttributes = attributesMD5(ma)
	}
	return out
}

// attributeWanted reports whether MessageAttributeNames asks for name:
// All, ".*", the name, or a prefix of it ending in ".*".
func attributeWanted(name string, wanted []string) bool {
	for _, w := range wanted {
		if w == "All" || w == ".*" || w == name {
			return true
		}
		if prefix, ok := strings.CutSuffix(w, ".*"); ok && strings.HasPrefix(name, prefix+".") {
			return true
		}
	}
	return false
}
