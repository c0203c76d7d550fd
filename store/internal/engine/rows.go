package engine

import (
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Bulk rows travel as one JSON array parameter, so that every dialect's
// insert is a single static statement. Payloads are hex-encoded (every
// dialect has a built-in to decode hex).

// Bounds of one bulk statement, below every driver's packet limit.
const (
	maxChunkRows  = 500
	maxChunkBytes = 2 << 20
)

// messageRow is a message as InsertMessages takes it: numbered, its state
// and times worked out.
type messageRow struct {
	Seq       int64  `json:"s"`
	State     int    `json:"st"`
	VisibleAt *int64 `json:"v,omitempty"`
	ExpiresAt *int64 `json:"e,omitempty"`
	// BodyID, when set, names the shared body the row's payload is in
	// (see shareBodies); Payload is then empty.
	BodyID *int64 `json:"b,omitempty"`
	messageBody
}

// messageBody is what every bulk message row carries as the sender gave
// it (its fields are inlined in the row's JSON).
type messageBody struct {
	MessageID    string   `json:"mid,omitempty"`
	SessionID    string   `json:"sid,omitempty"`
	PartitionKey string   `json:"pk,omitempty"`
	ContentType  string   `json:"ct,omitempty"`
	Properties   *string  `json:"pr,omitempty"`
	Headers      *string  `json:"hd,omitempty"`
	Payload      hexBytes `json:"p"`
}

func newBody(m *store.NewMessage) (messageBody, error) {
	props, err := encodeProps(m.Properties)
	if err != nil {
		return messageBody{}, err
	}
	headers, err := encodeProps(m.Headers)
	return messageBody{
		MessageID: m.MessageID, SessionID: m.SessionID, PartitionKey: m.PartitionKey,
		ContentType: m.ContentType, Properties: props, Headers: headers, Payload: m.Payload,
	}, err
}

// leaseRow is one message a lease group hands out, under its request's
// token and lock expiry.
type leaseRow struct {
	Seq   int64 `json:"s"`
	Token int64 `json:"t"`
	Until int64 `json:"u"`
}

// receiptRow is one receipt of a group of completions.
type receiptRow struct {
	Seq   int64 `json:"s"`
	Token int64 `json:"t"`
}

type recordRow struct {
	Position   int64    `json:"s"`
	Namespace  string   `json:"ns"`
	Key        string   `json:"k"`
	Properties *string  `json:"pr,omitempty"`
	Payload    hexBytes `json:"p"`
}

type seqMapping struct {
	Old int64 `json:"o"`
	New int64 `json:"n"`
}

// chunks splits n rows into runs of at most maxChunkRows rows and about
// maxChunkBytes bytes, given each row's size.
func chunks(n int, size func(i int) int) [][2]int {
	var out [][2]int
	start, bytes := 0, 0
	for i := 0; i < n; i++ {
		s := size(i)
		if i > start && (i-start == maxChunkRows || bytes+s > maxChunkBytes) {
			out = append(out, [2]int{start, i})
			start, bytes = i, 0
		}
		bytes += s
	}
	if n > start {
		out = append(out, [2]int{start, n})
	}
	return out
}

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func encodeProps(p map[string]string) (*string, error) {
	if len(p) == 0 {
		return nil, nil
	}
	s, err := jsonText(p)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

func decodeProps(s sql.NullString) (map[string]string, error) {
	if !s.Valid || s.String == "" {
		return nil, nil
	}
	var p map[string]string
	if err := json.Unmarshal([]byte(s.String), &p); err != nil {
		return nil, fmt.Errorf("stored properties: %w", err)
	}
	return p, nil
}

// JSONList encodes a list parameter as a JSON array, for dialects that
// read lists with json_each or JSON_TABLE.
func JSONList(v []int64) any {
	b, _ := json.Marshal(v)
	return string(b)
}

// hexBytes is a payload that travels in JSON hex-encoded (every dialect
// has a built-in to decode hex), and as itself where a statement binds it.
type hexBytes []byte

// MarshalText encodes b in hex, which encoding/json quotes as a string.
func (b hexBytes) MarshalText() ([]byte, error) {
	out := make([]byte, hex.EncodedLen(len(b)))
	hex.Encode(out, b)
	return out, nil
}

func ptr[T any](v T) *T { return &v }

// payloadBytes is a payload to bind: an empty one, never NULL, for nil.
func payloadBytes(p []byte) []byte {
	if p == nil {
		return []byte{}
	}
	return p
}

// nullable binds a pointer as its value, or NULL.
func nullable[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// scanMessage reads the message columns in the order of SelectReady and
// PeekMessages: seq, state, visible_at, expires_at, delivery_count,
// enqueued_at, message_id, session_id, partition_key, content_type,
// properties, payload, headers.
func scanMessage(s *rows) (sluicetype.Message, error) {
	var m nullMessage
	if err := s.Scan(m.scanDest()...); err != nil {
		return sluicetype.Message{}, err
	}
	return m.message()
}

// nullMessage holds the message columns of a row as scanned; in an outer
// join they may all be NULL.
type nullMessage struct {
	seq, state, visible, expires, count, enqueued sql.NullInt64
	mid, sid, pk, ct, props, headers              sql.NullString
	payload                                       []byte
}

func (m *nullMessage) scanDest() []any {
	return []any{&m.seq, &m.state, &m.visible, &m.expires, &m.count, &m.enqueued,
		&m.mid, &m.sid, &m.pk, &m.ct, &m.props, &m.payload, &m.headers}
}

func (m *nullMessage) message() (sluicetype.Message, error) {
	msg := sluicetype.Message{
		Seq: m.seq.Int64, State: sluicetype.MessageState(m.state.Int64), DeliveryCount: int(m.count.Int64),
		VisibleAt: nullMS(m.visible), ExpiresAt: nullMS(m.expires), EnqueuedAt: fromMS(m.enqueued.Int64),
		MessageID: m.mid.String, SessionID: m.sid.String, PartitionKey: m.pk.String, ContentType: m.ct.String,
		Payload: m.payload,
	}
	if msg.Payload == nil {
		msg.Payload = []byte{}
	}
	var err error
	if msg.Properties, err = decodeProps(m.props); err != nil {
		return msg, err
	}
	msg.Headers, err = decodeProps(m.headers)
	return msg, err
}

// scanDeadLetter reads the columns of PeekDeadLetters.
func scanDeadLetter(s *rows) (sluicetype.DeadLetter, error) {
	var (
		d                                sluicetype.DeadLetter
		enqueued, dead                   int64
		expires, remove                  sql.NullInt64
		mid, sid, pk, ct, props, headers sql.NullString
	)
	err := s.Scan(&d.Seq, &d.DeliveryCount, &enqueued, &expires, &mid, &sid, &pk, &ct, &props,
		&d.Payload, &d.Reason, &d.Description, &dead, &remove, &headers)
	if err != nil {
		return d, err
	}
	d.EnqueuedAt, d.ExpiresAt, d.DeadAt, d.RemoveAt = fromMS(enqueued), nullMS(expires), fromMS(dead), nullMS(remove)
	d.MessageID, d.SessionID, d.PartitionKey, d.ContentType = mid.String, sid.String, pk.String, ct.String
	if d.Payload == nil {
		d.Payload = []byte{}
	}
	if d.Properties, err = decodeProps(props); err != nil {
		return d, err
	}
	d.Headers, err = decodeProps(headers)
	return d, err
}

// scanRecord reads the columns of ReadRecords and ReadStreamRecords.
func scanRecord(s *rows) (sluicetype.Record, error) {
	var (
		r        sluicetype.Record
		props    sql.NullString
		appended int64
	)
	if err := s.Scan(&r.Position, &r.Namespace, &r.Key, &props, &r.Payload, &appended); err != nil {
		return r, err
	}
	r.AppendedAt = fromMS(appended)
	if r.Payload == nil {
		r.Payload = []byte{}
	}
	var err error
	r.Properties, err = decodeProps(props)
	return r, err
}
