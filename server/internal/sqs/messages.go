package sqs

import (
	"cmp"
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
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
	// A FIFO message's SQS id and deduplication id: its sluice MessageID
	// is what duplicate detection compares.
	propMessageID = propPrefix + "MessageId"
	propDedupID   = propPrefix + "MessageDeduplicationId"
)

// attributeValue is an SQS message attribute.
type attributeValue struct {
	DataType         string
	StringValue      *string  `json:",omitempty"`
	BinaryValue      []byte   `json:",omitempty"`
	StringListValues []string `json:",omitempty"`
	BinaryListValues [][]byte `json:",omitempty"`
}

// binary reports whether the attribute is of the Binary type (or a
// label of it), which its digest and storage treat apart.
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

// sqsSize is a message's size as SQS counts it against
// MaximumMessageSize: its body, and its attributes' names, types and
// values.
func sqsSize(body string, attrs map[string]attributeValue) int {
	n := len(body)
	for name, a := range attrs {
		n += len(name) + len(a.DataType) + len(a.value())
	}
	return n
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

// validID reports whether s can be a MessageGroupId or a
// MessageDeduplicationId: 1 to 128 of the ASCII letters, digits and
// punctuation.
func validID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
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

// messageID is the SQS id of a received message: a FIFO message's kept
// id, or the MessageID it was sent with, or for one sent without (through
// sluice's own API), a UUID-shaped id made of its queue and sequence
// number, the same on every receive.
func messageID(queue string, m *sluice.ReceivedMessage) string {
	if id := m.ApplicationProperties[propMessageID]; id != "" {
		return id
	}
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
	case e.MessageDeduplicationId != nil && !q.fifo():
		return nil, invalidParameter("MessageDeduplicationId applies to FIFO queues only")
	case q.fifo() && e.MessageGroupId == nil:
		return nil, missingParameter("a MessageGroupId (the queue is FIFO)")
	case q.fifo() && e.DelaySeconds != nil && *e.DelaySeconds != 0:
		return nil, invalidParameter("DelaySeconds per message is not valid on a FIFO queue: set the queue's DelaySeconds")
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
		g := *e.MessageGroupId
		if !validID(g) {
			return nil, invalidParameter("MessageGroupId is 1 to 128 letters, digits and punctuation")
		}
		if q.fifo() {
			m.SessionID = g
		} else {
			m.ApplicationProperties[propGroupID] = g
		}
	}
	if q.fifo() {
		var dedup string
		switch {
		case e.MessageDeduplicationId != nil:
			if dedup = *e.MessageDeduplicationId; !validID(dedup) {
				return nil, invalidParameter("MessageDeduplicationId is 1 to 128 letters, digits and punctuation")
			}
		case q.sqs.ContentDedup:
			sum := sha256.Sum256([]byte(*e.MessageBody))
			dedup = hex.EncodeToString(sum[:])
		default:
			return nil, invalidParameter("the queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
		}
		m.ApplicationProperties[propMessageID], m.ApplicationProperties[propDedupID] = m.MessageID, dedup
		m.MessageID = dedup
		if q.sqs.DedupScope == "messageGroup" {
			sum := sha256.Sum256([]byte(m.SessionID + "\n" + dedup))
			m.MessageID = hex.EncodeToString(sum[:])
		}
	}
	sender := "anonymous"
	if rq.accessKey != "" {
		sender = rq.accessKey
	}
	m.ApplicationProperties[propSenderID] = sender
	// SQS counts the body and the attributes' names, types and values;
	// sluice counts what it stores, which is more, within the queue's
	// MaxMessageSize that leaves room for it (propertyRoom).
	if size := sqsSize(*e.MessageBody, e.MessageAttributes); size > q.maxSize() {
		return nil, invalidParameter("the message, with its attributes, holds %d bytes: queue %q takes at most %d (MaximumMessageSize)",
			size, q.name, q.maxSize())
	}
	stored := len(m.Body) + len(m.MessageID) + len(m.SessionID)
	for k, v := range m.ApplicationProperties {
		stored += len(k) + len(v)
	}
	if stored > q.props.MaxMessageSize {
		return nil, invalidParameter("the message holds %d bytes as sluice stores it, with what the endpoint keeps beside its attributes: "+
			"queue %q takes at most %d", stored, q.name, q.props.MaxMessageSize)
	}
	delay, err := intParam("DelaySeconds", e.DelaySeconds, q.sqs.DelaySeconds, 0, maxDelay)
	if err != nil {
		return nil, err
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
	MessageId                    string
	MD5OfMessageBody             string
	MD5OfMessageAttributes       string `json:",omitempty"`
	MD5OfMessageSystemAttributes string `json:",omitempty"`
	SequenceNumber               string `json:",omitempty"`
}

// sqsID is the SQS id of a message the endpoint sends.
func sqsID(m *sluice.Message) string {
	return cmp.Or(m.ApplicationProperties[propMessageID], m.MessageID)
}

// sequenceNumber is a FIFO message's SequenceNumber, as SQS gives it.
func sequenceNumber(q queue, seq int64) string {
	if !q.fifo() {
		return ""
	}
	return strconv.FormatInt(seq, 10)
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
	seq, err := s.Send(ctx, m)
	if err != nil {
		h.forgetMissing(q.name, err)
		return nil, err
	}
	return sendMessageOutput{MessageId: sqsID(m), MD5OfMessageBody: bodyMD5(*in.MessageBody),
		MD5OfMessageAttributes: attributesMD5(in.MessageAttributes), MD5OfMessageSystemAttributes: attributesMD5(in.MessageSystemAttributes),
		SequenceNumber: sequenceNumber(q, seq)}, nil
}

// deref is the string a request's optional field holds ("" when absent).
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
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
	Id                           string
	MessageId                    string
	MD5OfMessageBody             string
	MD5OfMessageAttributes       string `json:",omitempty"`
	MD5OfMessageSystemAttributes string `json:",omitempty"`
	SequenceNumber               string `json:",omitempty"`
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
		total += sqsSize(deref(e.MessageBody), e.MessageAttributes)
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
		seqs, err := s.SendBatch(ctx, msgs)
		if err != nil {
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
			out.Successful = append(out.Successful, sendBatchSuccess{Id: e.Id, MessageId: sqsID(msgs[j]),
				MD5OfMessageBody: bodyMD5(*e.MessageBody), MD5OfMessageAttributes: attributesMD5(e.MessageAttributes),
				MD5OfMessageSystemAttributes: attributesMD5(e.MessageSystemAttributes), SequenceNumber: sequenceNumber(q, seqs[j])})
		}
	}
	return out, nil
}
