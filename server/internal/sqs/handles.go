package sqs

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
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
//     and the sequence numbers of the first and last messages of the
//     group that the receive returned.
type handle struct {
	Token string `json:"m"`
	// Source is the queue a dead letter was dead-lettered from.
	Source string `json:"q,omitempty"`
	// Group, SessionToken, First and Last are a FIFO message's.
	Group        string `json:"g,omitempty"`
	SessionToken string `json:"s,omitempty"`
	First        int64  `json:"a,omitempty"`
	Last         int64  `json:"b,omitempty"`
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
		case kind == "d" && h.Source != "" && h.Group == "" && h.SessionToken == "":
		case kind == "f" && h.Source == "" && h.Group != "" && len(h.SessionToken) == 16 && isHex(h.SessionToken) &&
			h.First > 0 && h.Last >= h.First:
		default:
			return handle{}, receiptHandleIsInvalid(s)
		}
	}
	if len(h.Token) != 32 || !isHex(h.Token) {
		return handle{}, receiptHandleIsInvalid(s)
	}
	return h, nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}
