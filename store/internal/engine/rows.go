package engine

import (
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/sluicetype"
)

// Bulk rows travel as one JSON array parameter, so that every dialect's
// insert is a single static statement. Payloads are hex-encoded (every
// dialect has a built-in to decode hex).

// Bounds of one bulk statement, below every driver's packet limit.
const (
	maxChunkRows  = 500
	maxChunkBytes = 2 << 20
)

type messageRow struct {
	Seq          int64   `json:"s"`
	State        int     `json:"st"`
	VisibleAt    *int64  `json:"v,omitempty"`
	ExpiresAt    *int64  `json:"e,omitempty"`
	MessageID    string  `json:"mid,omitempty"`
	SessionID    string  `json:"sid,omitempty"`
	PartitionKey string  `json:"pk,omitempty"`
	ContentType  string  `json:"ct,omitempty"`
	Properties   *string `json:"pr,omitempty"`
	Payload      string  `json:"p"`
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
	Position   int64   `json:"s"`
	Namespace  string  `json:"ns"`
	Key        string  `json:"k"`
	Properties *string `json:"pr,omitempty"`
	Payload    string  `json:"p"`
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

func hexPayload(b []byte) string { return hex.EncodeToString(b) }

func ptr[T any](v T) *T { return &v }

// scanner is *sql.Rows or *sql.Row.
type scanner interface{ Scan(dest ...any) error }

// scanMessage reads the message columns in the order of SelectReady and
// PeekMessages.
func scanMessage(s scanner) (sluicetype.Message, error) {
	var (
		m                       sluicetype.Message
		state                   int
		visible, expires        sql.NullInt64
		enqueued                int64
		mid, sid, pk, ct, props sql.NullString
	)
	err := s.Scan(&m.Seq, &state, &visible, &expires, &m.DeliveryCount, &enqueued,
		&mid, &sid, &pk, &ct, &props, &m.Payload)
	if err != nil {
		return m, err
	}
	m.State = sluicetype.MessageState(state)
	m.VisibleAt, m.ExpiresAt, m.EnqueuedAt = nullMS(visible), nullMS(expires), fromMS(enqueued)
	m.MessageID, m.SessionID, m.PartitionKey, m.ContentType = mid.String, sid.String, pk.String, ct.String
	if m.Payload == nil {
		m.Payload = []byte{}
	}
	m.Properties, err = decodeProps(props)
	return m, err
}

// scanDeadLetter reads the columns of PeekDeadLetters.
func scanDeadLetter(s scanner) (sluicetype.DeadLetter, error) {
	var (
		d                       sluicetype.DeadLetter
		enqueued, dead          int64
		expires, remove         sql.NullInt64
		mid, sid, pk, ct, props sql.NullString
	)
	err := s.Scan(&d.Seq, &d.DeliveryCount, &enqueued, &expires, &mid, &sid, &pk, &ct, &props,
		&d.Payload, &d.Reason, &d.Description, &dead, &remove)
	if err != nil {
		return d, err
	}
	d.EnqueuedAt, d.ExpiresAt, d.DeadAt, d.RemoveAt = fromMS(enqueued), nullMS(expires), fromMS(dead), nullMS(remove)
	d.MessageID, d.SessionID, d.PartitionKey, d.ContentType = mid.String, sid.String, pk.String, ct.String
	if d.Payload == nil {
		d.Payload = []byte{}
	}
	d.Properties, err = decodeProps(props)
	return d, err
}

// scanRecord reads the columns of ReadRecords.
func scanRecord(s scanner) (sluicetype.Record, error) {
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
