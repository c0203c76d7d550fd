package sqs

import (
	"cmp"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
)

// Bounds of SQS's messages and batches.
const (
	maxBatch           = 10
	maxBatchBytes      = 1 << 20
	maxAttributes      = 10
	maxAttributeName   = 256
	maxDataTypeLength  = 256
	maxReceiveMessages = 10
)

// Application properties the endpoint keeps for itself beside a message's
// attributes. SQS refuses attribute names that start with "AWS.", so
// these cannot collide with one.
const (
	propPrefix      = "AWS.SQS."
	propType        = propPrefix + "Type." // + name: a non-String attribute's DataType
	propSenderID    = propPrefix + "SenderId"
	propGroupID     = propPrefix + "MessageGroupId"
	propTraceHeader = propPrefix + "AWSTraceHeader"
)

// attributeValue is an SQS message attribute.
type attributeValue struct {
	DataType         string
	StringValue      *string  `json:",omitempty"`
	BinaryValue      []byte   `json:",omitempty"`
	StringListValues []string `json:",omitempty"`
	BinaryListValues [][]byte `json:",omitempty"`
}

// transport is the attribute's type as its MD5 digest encodes it.
func (a attributeValue) binary() bool { return strings.HasPrefix(a.DataType, "Binary") }

// value is the attribute's value as bytes.
func (a attributeValue) value() []byte {
	if a.binary() {
		return a.BinaryValue
	}
	if a.StringValue == nil {
		return nil
	}
	return []byte(*a.StringValue)
}

// checkAttributes checks message attributes as SQS does.
func checkAttributes(attrs map[string]attributeValue) error {
	if len(attrs) > maxAttributes {
		return invalidParameter("a message has at most %d attributes: %d given", maxAttributes, len(attrs))
	}
	for name, a := range attrs {
		if err := checkAttributeName(name); err != nil {
			return err
		}
		base, _, _ := strings.Cut(a.DataType, ".")
		switch {
		case len(a.DataType) > maxDataTypeLength:
			return invalidParameter("attribute %q: a DataType is at most %d characters", name, maxDataTypeLength)
		case base != "String" && base != "Number" && base != "Binary":
			return invalidParameter("attribute %q: DataType %q must be String, Number or Binary, with an optional .label", name, truncate(a.DataType, 100))
		case len(a.StringListValues) > 0 || len(a.BinaryListValues) > 0:
			return unsupported("attribute %q: list values are not implemented (nor are they by SQS)", name)
		case base == "Binary" && (a.BinaryValue == nil || a.StringValue != nil):
			return invalidParameter("attribute %q of DataType %s needs a BinaryValue and no StringValue", name, a.DataType)
		case base != "Binary" && (a.StringValue == nil || a.BinaryValue != nil):
			return invalidParameter("attribute %q of DataType %s needs a StringValue and no BinaryValue", name, a.DataType)
		case base == "Number" && !isNumber(*a.StringValue):
			return invalidParameter("attribute %q of DataType Number holds %q, not a number", name, truncate(*a.StringValue, 40))
		case base != "Binary" && !validBody(*a.StringValue):
			return invalidParameter("attribute %q holds characters SQS does not allow", name)
		}
	}
	return nil
}

// checkAttributeName checks an attribute's name as SQS does: up to 256
// letters, digits, '_', '-' and '.', no ".." and no '.' at either end,
// not starting with "AWS." or "Amazon.".
func checkAttributeName(name string) error {
	lower := strings.ToLower(name)
	switch {
	case name == "" || len(name) > maxAttributeName:
		return invalidParameter("an attribute name is 1 to %d characters", maxAttributeName)
	case strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon."):
		return invalidParameter("attribute name %q: names starting with AWS. or Amazon. are reserved", truncate(name, 100))
	case strings.Contains(name, "..") || name[0] == '.' || name[len(name)-1] == '.':
		return invalidParameter("attribute name %q: no '..', and no '.' at either end", truncate(name, 100))
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return invalidParameter("attribute name %q holds %q: names are letters, digits, '_', '-' and '.'", truncate(name, 100), c)
		}
	}
	return nil
}

// isNumber reports whether s is a number as SQS takes one.
func isNumber(s string) bool {
	_, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return err == nil && len(s) <= 40
}

// validBody reports whether s holds only the characters SQS allows in a
// message: #x9, #xA, #xD, #x20 to #xD7FF, #xE000 to #xFFFD and #x10000 to
// #x10FFFF.
func validBody(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !(r == 0x9 || r == 0xA || r == 0xD || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF) {
			return false
		}
	}
	return true
}

// attributesMD5 is the MD5 digest SQS gives of message attributes: over
// the attributes in name order, each its name, DataType, a transport byte
// (1 string, 2 binary) and value, the strings led by their lengths.
func attributesMD5(attrs map[string]attributeValue) string {
	if len(attrs) == 0 {
		return ""
	}
	h := md5.New()
	put := func(b []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		a := attrs[name]
		put([]byte(name))
		put([]byte(a.DataType))
		if a.binary() {
			h.Write([]byte{2})
		} else {
			h.Write([]byte{1})
		}
		put(a.value())
	}
	return hex.EncodeToString(h.Sum(nil))
}

func bodyMD5(body string) string {
	sum := md5.Sum([]byte(body))
	return hex.EncodeToString(sum[:])
}

// newMessageID is a random UUID (version 4), as SQS's message ids are.
func newMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// messageID is the SQS id of a received message: the MessageID it was
// sent with, or for one sent without (through sluice's own API), a
// UUID-shaped id made of its queue and sequence number, the same on every
// receive.
func messageID(queue string, m *sluice.ReceivedMessage) string {
	if m.MessageID != "" {
		return m.MessageID
	}
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", crc32.ChecksumIEEE([]byte(queue)), uint64(m.SequenceNumber)&(1<<48-1))
}

// sendEntry is a message to send, SendMessage's or a batch entry's.
type sendEntry struct {
	Id                      string
	MessageBody             *string
	DelaySeconds            *int
	MessageAttributes       map[string]attributeValue
	MessageSystemAttributes map[string]attributeValue
	MessageDeduplicationId  *string
	MessageGroupId          *string
}

// message checks an entry and makes the message it sends to q.
func (rq *request) message(q queue, e *sendEntry) (*sluice.Message, error) {
	switch {
	case e.MessageBody == nil || *e.MessageBody == "":
		return nil, missingParameter("a MessageBody of at least one character")
	case !validBody(*e.MessageBody):
		return nil, &Error{Code: "InvalidMessageContents", Status: 400,
			Message: "the message body holds characters SQS does not allow (#x9, #xA, #xD, #x20 to #xD7FF, #xE000 to #xFFFD, #x10000 to #x10FFFF)"}
	case e.MessageDeduplicationId != nil:
		return nil, invalidParameter("MessageDeduplicationId applies to FIFO queues only")
	}
	if err := checkAttributes(e.MessageAttributes); err != nil {
		return nil, err
	}
	m := &sluice.Message{Body: []byte(*e.MessageBody), MessageID: newMessageID(), ApplicationProperties: map[string]string{}}
	for name, a := range e.MessageAttributes {
		if a.binary() {
			m.ApplicationProperties[name] = base64.StdEncoding.EncodeToString(a.BinaryValue)
		} else {
			m.ApplicationProperties[name] = *a.StringValue
		}
		if a.DataType != "String" {
			m.ApplicationProperties[propType+name] = a.DataType
		}
	}
	for name, a := range e.MessageSystemAttributes {
		if name != "AWSTraceHeader" || a.DataType != "String" || a.StringValue == nil || len(*a.StringValue) > 1024 {
			return nil, invalidParameter("the one message system attribute is AWSTraceHeader, a String of at most 1,024 characters")
		}
		m.ApplicationProperties[propTraceHeader] = *a.StringValue
	}
	if e.MessageGroupId != nil {
		if g := *e.MessageGroupId; g == "" || len(g) > 128 || !validBody(g) {
			return nil, invalidParameter("MessageGroupId is 1 to 128 characters")
		}
		m.ApplicationProperties[propGroupID] = *e.MessageGroupId
	}
	sender := "anonymous"
	if rq.accessKey != "" {
		sender = rq.accessKey
	}
	m.ApplicationProperties[propSenderID] = sender
	size := len(m.Body) + len(m.MessageID)
	for k, v := range m.ApplicationProperties {
		size += len(k) + len(v)
	}
	if size > q.props.MaxMessageSize {
		return nil, invalidParameter("the message, with its attributes, holds %d bytes: queue %q takes at most %d (MaximumMessageSize)",
			size, q.name, q.props.MaxMessageSize)
	}
	delay := q.sqs.DelaySeconds
	if e.DelaySeconds != nil {
		if *e.DelaySeconds < 0 || *e.DelaySeconds > maxDelay {
			return nil, invalidParameter("DelaySeconds %d: must be from 0 to %d", *e.DelaySeconds, maxDelay)
		}
		delay = *e.DelaySeconds
	}
	if delay > 0 {
		m.ScheduledEnqueueTime = time.Now().Add(time.Duration(delay) * time.Second)
	}
	return m, nil
}

type sendMessageInput struct {
	QueueUrl string
	sendEntry
}

type sendMessageOutput struct {
	MessageId              string
	MD5OfMessageBody       string
	MD5OfMessageAttributes string `json:",omitempty"`
}

func (h *Handler) sendMessage(ctx context.Context, rq *request, body []byte) (any, error) {
	var in sendMessageInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.Id != "" {
		return nil, invalidParameter("SendMessage takes no Id")
	}
	q, err := h.queue(ctx, rq, in.QueueUrl, Send)
	if err != nil {
		return nil, err
	}
	m, err := rq.message(q, &in.sendEntry)
	if err != nil {
		return nil, err
	}
	s, err := h.c.NewSender(q.name)
	if err != nil {
		return nil, err
	}
	if _, err := s.Send(ctx, m); err != nil {
		h.forgetMissing(q.name, err)
		return nil, err
	}
	return sendMessageOutput{MessageId: m.MessageID, MD5OfMessageBody: bodyMD5(*in.MessageBody),
		MD5OfMessageAttributes: attributesMD5(in.MessageAttributes)}, nil
}

// forgetMissing drops a queue from the cache when err says it is gone.
func (h *Handler) forgetMissing(name string, err error) {
	if errors.Is(err, sluice.ErrEntityNotFound) {
		h.forget(name)
	}
}

type sendMessageBatchInput struct {
	QueueUrl string
	Entries  []sendEntry
}

type batchFailure struct {
	Id          string
	SenderFault bool
	Code        string
	Message     string
}

type sendBatchSuccess struct {
	Id                     string
	MessageId              string
	MD5OfMessageBody       string
	MD5OfMessageAttributes string `json:",omitempty"`
}

type sendMessageBatchOutput struct {
	Successful []sendBatchSuccess
	Failed     []batchFailure
}

// checkEntryIDs checks a batch's entry ids as SQS does: 1 to 10 entries,
// each id 1 to 80 letters, digits, '-' and '_', all distinct.
func checkEntryIDs(ids []string) error {
	switch {
	case len(ids) == 0:
		return emptyBatch()
	case len(ids) > maxBatch:
		return tooManyEntries(len(ids))
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if id == "" || len(id) > 80 || strings.IndexFunc(id, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
		}) >= 0 {
			return invalidBatchEntryID(id)
		}
		if seen[id] {
			return idsNotDistinct(id)
		}
		seen[id] = true
	}
	return nil
}

// failure is a batch entry's failure, as SQS reports one.
func failure(id string, err error) batchFailure {
	e := asError(err)
	return batchFailure{Id: id, SenderFault: !e.Server, Code: e.Code, Message: e.Message}
}

func (h *Handler) sendMessageBatch(ctx context.Context, rq *request, body []byte) (any, error) {
	var in sendMessageBatchInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	ids := make([]string, len(in.Entries))
	total := 0
	for i, e := range in.Entries {
		ids[i] = e.Id
		if e.MessageBody != nil {
			total += len(*e.MessageBody)
		}
		for name, a := range e.MessageAttributes {
			total += len(name) + len(a.DataType) + len(a.value())
		}
	}
	if err := checkEntryIDs(ids); err != nil {
		return nil, err
	}
	if total > maxBatchBytes {
		return nil, batchTooLong(total)
	}
	q, err := h.queue(ctx, rq, in.QueueUrl, Send)
	if err != nil {
		return nil, err
	}
	out := sendMessageBatchOutput{Successful: []sendBatchSuccess{}, Failed: []batchFailure{}}
	var (
		msgs []*sluice.Message
		sent []int // the entries msgs holds
	)
	for i := range in.Entries {
		m, err := rq.message(q, &in.Entries[i])
		if err != nil {
			out.Failed = append(out.Failed, failure(in.Entries[i].Id, err))
			continue
		}
		msgs, sent = append(msgs, m), append(sent, i)
	}
	if len(msgs) > 0 {
		s, err := h.c.NewSender(q.name)
		if err != nil {
			return nil, err
		}
		// One transaction: the valid entries are all sent, or all fail.
		if _, err := s.SendBatch(ctx, msgs); err != nil {
			h.forgetMissing(q.name, err)
			if errors.Is(err, sluice.ErrEntityNotFound) {
				return nil, queueDoesNotExist(q.name)
			}
			h.log.Error("sluice: sqs: SendMessageBatch", "queue", q.name, "err", err)
			for _, i := range sent {
				out.Failed = append(out.Failed, failure(in.Entries[i].Id, err))
			}
			return out, nil
		}
		for j, i := range sent {
			e := &in.Entries[i]
			out.Successful = append(out.Successful, sendBatchSuccess{Id: e.Id, MessageId: msgs[j].MessageID,
				MD5OfMessageBody: bodyMD5(*e.MessageBody), MD5OfMessageAttributes: attributesMD5(e.MessageAttributes)})
		}
	}
	return out, nil
}

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

func (h *Handler) receiveMessage(ctx context.Context, rq *request, body []byte) (any, error) {
	var in receiveMessageInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	max := 1
	if in.MaxNumberOfMessages != nil {
		if *in.MaxNumberOfMessages < 1 || *in.MaxNumberOfMessages > maxReceiveMessages {
			return nil, invalidParameter("MaxNumberOfMessages %d: must be from 1 to %d", *in.MaxNumberOfMessages, maxReceiveMessages)
		}
		max = *in.MaxNumberOfMessages
	}
	names := append(slices.Clone(in.AttributeNames), in.MessageSystemAttributeNames...)
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
	q, err := h.queue(ctx, rq, in.QueueUrl, Receive)
	if err != nil {
		return nil, err
	}
	visibility := q.sqs.VisibilityTimeout
	if in.VisibilityTimeout != nil {
		if *in.VisibilityTimeout < 0 || *in.VisibilityTimeout > maxVisibility {
			return nil, invalidParameter("VisibilityTimeout %d: must be from 0 to %d", *in.VisibilityTimeout, maxVisibility)
		}
		visibility = *in.VisibilityTimeout
	}
	wait := q.sqs.ReceiveWait
	if in.WaitTimeSeconds != nil {
		if *in.WaitTimeSeconds < 0 || *in.WaitTimeSeconds > maxWait {
			return nil, invalidParameter("WaitTimeSeconds %d: must be from 0 to %d", *in.WaitTimeSeconds, maxWait)
		}
		wait = *in.WaitTimeSeconds
	}
	r, err := h.c.NewReceiver(q.name, &sluice.ReceiverOptions{LockDuration: lockFor(visibility)})
	if err != nil {
		return nil, err
	}
	var ms []*sluice.ReceivedMessage
	if wait == 0 {
		ms, err = r.TryReceive(ctx, max)
	} else {
		wctx, cancel, werr := h.wait(ctx, rq, time.Duration(wait)*time.Second)
		if werr != nil {
			return nil, werr
		}
		ms, err = r.Receive(wctx, max)
		cancel()
		if len(ms) == 0 && ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
			err = nil // the wait ended with nothing to receive
		}
	}
	if err != nil && len(ms) == 0 {
		h.forgetMissing(q.name, err)
		return nil, err
	}
	out := receiveMessageOutput{Messages: make([]message, 0, len(ms))}
	for _, m := range ms {
		out.Messages = append(out.Messages, received(q.name, m, names, in.MessageAttributeNames))
	}
	return out, nil
}

// lockFor is the lock of a receive whose visibility timeout is seconds:
// SQS's 0, visible again at once, is sluice's shortest lock.
func lockFor(seconds int) time.Duration {
	if seconds == 0 {
		return time.Millisecond
	}
	return time.Duration(seconds) * time.Second
}

// wait bounds a long poll.
func (h *Handler) wait(ctx context.Context, rq *request, d time.Duration) (context.Context, context.CancelFunc, error) {
	if h.cfg.Wait == nil {
		ctx, cancel := context.WithTimeout(ctx, d)
		return ctx, cancel, nil
	}
	return h.cfg.Wait(ctx, rq.key, d)
}

// received is a received message as SQS shows it, with the system
// attributes and message attributes asked for.
func received(queue string, m *sluice.ReceivedMessage, system, wanted []string) message {
	out := message{MessageId: messageID(queue, m), ReceiptHandle: m.LockToken, Body: string(m.Body), MD5OfBody: bodyMD5(string(m.Body))}
	all := slices.Contains(system, "All")
	want := func(a string) bool { return all || slices.Contains(system, a) }
	attrs := map[string]string{}
	if want("SenderId") {
		attrs["SenderId"] = cmp.Or(m.ApplicationProperties[propSenderID], "sluice")
	}
	if want("SentTimestamp") {
		attrs["SentTimestamp"] = strconv.FormatInt(m.EnqueuedTime.UnixMilli(), 10)
	}
	if want("ApproximateReceiveCount") {
		attrs["ApproximateReceiveCount"] = strconv.Itoa(m.DeliveryCount)
	}
	if g, ok := m.ApplicationProperties[propGroupID]; ok && want("MessageGroupId") {
		attrs["MessageGroupId"] = g
	}
	if t, ok := m.ApplicationProperties[propTraceHeader]; ok && want("AWSTraceHeader") {
		attrs["AWSTraceHeader"] = t
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

// lockToken checks a receipt handle: a sluice lock token, 32 hex digits.
func lockToken(handle string) (string, error) {
	if handle == "" {
		return "", missingParameter("ReceiptHandle")
	}
	if len(handle) != 32 {
		return "", receiptHandleIsInvalid(handle)
	}
	if _, err := hex.DecodeString(handle); err != nil {
		return "", receiptHandleIsInvalid(handle)
	}
	return handle, nil
}

type deleteMessageInput struct {
	QueueUrl      string
	ReceiptHandle string
}

func (h *Handler) deleteMessage(ctx context.Context, rq *request, body []byte) (any, error) {
	var in deleteMessageInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, err := h.queue(ctx, rq, in.QueueUrl, Receive)
	if err != nil {
		return nil, err
	}
	token, err := lockToken(in.ReceiptHandle)
	if err != nil {
		return nil, err
	}
	r, err := h.c.NewReceiver(q.name, nil)
	if err != nil {
		return nil, err
	}
	// As SQS documents: a handle that is not the message's latest (its
	// lock ended) succeeds without deleting it.
	if err := r.Complete(ctx, &sluice.ReceivedMessage{LockToken: token}); err != nil && !errors.Is(err, sluice.ErrLockLost) {
		h.forgetMissing(q.name, err)
		return nil, err
	}
	return empty{}, nil
}

type batchEntry struct {
	Id                string
	ReceiptHandle     string
	VisibilityTimeout *int
}

type batchInput struct {
	QueueUrl string
	Entries  []batchEntry
}

type batchSuccess struct {
	Id string
}

type batchOutput struct {
	Successful []batchSuccess
	Failed     []batchFailure
}

// batch checks a batch of receipt handles and returns its queue.
func (h *Handler) batch(ctx context.Context, rq *request, body []byte) (batchInput, queue, error) {
	var in batchInput
	if err := decode(body, &in); err != nil {
		return in, queue{}, err
	}
	ids := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		ids[i] = e.Id
	}
	if err := checkEntryIDs(ids); err != nil {
		return in, queue{}, err
	}
	q, err := h.queue(ctx, rq, in.QueueUrl, Receive)
	return in, q, err
}

func (h *Handler) deleteMessageBatch(ctx context.Context, rq *request, body []byte) (any, error) {
	in, q, err := h.batch(ctx, rq, body)
	if err != nil {
		return nil, err
	}
	out := batchOutput{Successful: []batchSuccess{}, Failed: []batchFailure{}}
	var (
		msgs    []*sluice.ReceivedMessage
		entries []int
	)
	for i, e := range in.Entries {
		if e.VisibilityTimeout != nil {
			out.Failed = append(out.Failed, failure(e.Id, invalidParameter("a DeleteMessageBatch entry takes no VisibilityTimeout")))
			continue
		}
		token, err := lockToken(e.ReceiptHandle)
		if err != nil {
			out.Failed = append(out.Failed, failure(e.Id, err))
			continue
		}
		msgs, entries = append(msgs, &sluice.ReceivedMessage{LockToken: token}), append(entries, i)
	}
	if len(msgs) == 0 {
		return out, nil
	}
	r, err := h.c.NewReceiver(q.name, nil)
	if err != nil {
		return nil, err
	}
	failed := map[int]error{}
	if err := r.CompleteBatch(ctx, msgs); err != nil {
		var be *sluice.SettleBatchError
		if !errors.As(err, &be) {
			h.forgetMissing(q.name, err)
			return nil, err
		}
		for _, f := range be.Failed {
			if !errors.Is(f.Err, sluice.ErrLockLost) { // a stale handle succeeds, as in DeleteMessage
				failed[f.Index] = f.Err
			}
		}
	}
	for j, i := range entries {
		if err, ok := failed[j]; ok {
			out.Failed = append(out.Failed, failure(in.Entries[i].Id, err))
		} else {
			out.Successful = append(out.Successful, batchSuccess{Id: in.Entries[i].Id})
		}
	}
	return out, nil
}

type changeVisibilityInput struct {
	QueueUrl          string
	ReceiptHandle     string
	VisibilityTimeout *int
}

func (h *Handler) changeMessageVisibility(ctx context.Context, rq *request, body []byte) (any, error) {
	var in changeVisibilityInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, err := h.queue(ctx, rq, in.QueueUrl, Receive)
	if err != nil {
		return nil, err
	}
	if err := h.changeVisibility(ctx, q, in.ReceiptHandle, in.VisibilityTimeout); err != nil {
		return nil, err
	}
	return empty{}, nil
}

// changeVisibility makes a message visible again after seconds: at once
// (0) by abandoning it, otherwise by renewing its lock for that long.
func (h *Handler) changeVisibility(ctx context.Context, q queue, handle string, seconds *int) error {
	token, err := lockToken(handle)
	if err != nil {
		return err
	}
	if seconds == nil {
		return missingParameter("VisibilityTimeout")
	}
	if *seconds < 0 || *seconds > maxVisibility {
		return invalidParameter("VisibilityTimeout %d: must be from 0 to %d", *seconds, maxVisibility)
	}
	m := &sluice.ReceivedMessage{LockToken: token}
	if *seconds == 0 {
		r, err := h.c.NewReceiver(q.name, nil)
		if err != nil {
			return err
		}
		err = r.Abandon(ctx, m, nil)
		return notInflight(err)
	}
	r, err := h.c.NewReceiver(q.name, &sluice.ReceiverOptions{LockDuration: time.Duration(*seconds) * time.Second})
	if err != nil {
		return err
	}
	return notInflight(r.RenewLock(ctx, m))
}

// notInflight reports a lost lock as SQS does.
func notInflight(err error) error {
	if errors.Is(err, sluice.ErrLockLost) {
		return messageNotInflight()
	}
	return err
}

func (h *Handler) changeMessageVisibilityBatch(ctx context.Context, rq *request, body []byte) (any, error) {
	in, q, err := h.batch(ctx, rq, body)
	if err != nil {
		return nil, err
	}
	out := batchOutput{Successful: []batchSuccess{}, Failed: []batchFailure{}}
	for _, e := range in.Entries {
		if err := h.changeVisibility(ctx, q, e.ReceiptHandle, e.VisibilityTimeout); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			out.Failed = append(out.Failed, failure(e.Id, err))
			continue
		}
		out.Successful = append(out.Successful, batchSuccess{Id: e.Id})
	}
	return out, nil
}
