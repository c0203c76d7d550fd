package sqs

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
)

// A receipt handle names the lock of one receive of a message:
//
//   - a message of a standard queue: its lock token, 32 hex digits;
//   - a dead letter of a queue whose RedrivePolicy targets the queue
//     received from: "d." and, in base64url, JSON of the source queue and
//     the lock token;
//   - a message of a FIFO queue: "f." and, in base64url, JSON of its group
//     (the session), the session's lock token, the message's lock token,
//     and the sequence numbers of the messages the receive returned (at
//     most 10).
//
// A handle holds nothing its caller did not get from the receive: the
// tokens are the locks' own, and a caller who changes the sequence
// numbers of a FIFO handle can only hand its own group back early.
type handle struct {
	Token string `json:"m"`
	// Source is the queue a dead letter was dead-lettered from.
	Source string `json:"q,omitempty"`
	// Group, SessionToken and Seqs are a FIFO message's: Seqs are those
	// of the messages its receive returned.
	Group        string  `json:"g,omitempty"`
	SessionToken string  `json:"s,omitempty"`
	Seqs         []int64 `json:"n,omitempty"`
}

// maxHandleLength bounds a receipt handle SQS accepts (1,024 bytes in
// its API reference; a FIFO handle with the longest group is shorter).
const maxHandleLength = 1024

func (h handle) String() string {
	switch {
	case h.Source != "":
		return "d." + encodeHandle(handle{Token: h.Token, Source: h.Source})
	case h.Group != "":
		return "f." + encodeHandle(h)
	}
	return h.Token
}

func encodeHandle(h handle) string {
	b, _ := json.Marshal(h)
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseHandle reads a receipt handle, refusing one this endpoint did not
// give with ReceiptHandleIsInvalid.
func parseHandle(s string) (handle, error) {
	if s == "" {
		return handle{}, missingParameter("ReceiptHandle")
	}
	if len(s) > maxHandleLength {
		return handle{}, receiptHandleIsInvalid(s)
	}
	var h handle
	kind, rest, ok := strings.Cut(s, ".")
	if !ok {
		h.Token = s
	} else {
		b, err := base64.RawURLEncoding.DecodeString(rest)
		if err != nil || json.Unmarshal(b, &h) != nil {
			return handle{}, receiptHandleIsInvalid(s)
		}
		switch {
		case kind == "d" && h.Source != "" && h.Group == "" && h.SessionToken == "" && h.Seqs == nil:
		case kind == "f" && h.Source == "" && h.Group != "" && len(h.SessionToken) == 16 && isHex(h.SessionToken) &&
			len(h.Seqs) >= 1 && len(h.Seqs) <= maxReceiveMessages && !slices.ContainsFunc(h.Seqs, func(n int64) bool { return n < 1 }):
		default:
			return handle{}, receiptHandleIsInvalid(s)
		}
	}
	if !validToken(h.Token) {
		return handle{}, receiptHandleIsInvalid(s)
	}
	return h, nil
}

// validToken reports whether t is a lock token as sluice gives them: 32
// hex digits, the first 16 a sequence number from 1.
func validToken(t string) bool {
	if len(t) != 32 || !isHex(t) {
		return false
	}
	seq, err := strconv.ParseUint(t[:16], 16, 64)
	return err == nil && seq > 0 && seq <= math.MaxInt64
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}
