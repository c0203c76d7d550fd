// Package sigv4 verifies AWS Signature Version 4 on incoming HTTP
// requests that carry the signature in their Authorization header, as the
// AWS SDKs sign requests to services other than Amazon S3.
//
// It follows the SigV4 specification and the v4 signer of aws-sdk-go-v2:
// the canonical URI is the request's escaped path URI-encoded once more
// (so "%" becomes "%25"), without removing "." or ".." segments or
// repeated slashes; the payload hash is always the SHA-256 of the body.
// Presigned requests (signature in the query string), SigV4a and chunked
// (streaming) payload signing are not supported.
package sigv4

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxSkew is the furthest a request's date may be from the verifier's
// clock, in either direction, for Verify to accept the request.
const MaxSkew = 15 * time.Minute

// Every error Verify returns wraps exactly one of these sentinels; tell
// them apart with errors.Is. Each is listed with the error code AWS
// answers with for the same failure, which an AWS-compatible endpoint
// should answer with too:
//
//	ErrMissing     MissingAuthenticationToken
//	ErrMalformed   IncompleteSignature
//	ErrUnknownKey  InvalidClientTokenId
//	ErrExpired     RequestExpired (AWS also uses SignatureDoesNotMatch
//	               with a message starting "Signature expired")
//	ErrSignature   SignatureDoesNotMatch
//
// The wrapping error's message says what was wrong, in terms a client's
// developer can act on. It never contains the secret access key or the
// signature Verify computed, so it may be sent back to the client.
var (
	// ErrMissing means the request has no Authorization header, an empty
	// one, or one whose algorithm is not AWS4-HMAC-SHA256.
	ErrMissing = errors.New("sigv4: missing authentication")

	// ErrMalformed means the Authorization header, the request's date or
	// its query string cannot be parsed, or the header does not sign what
	// it must (host, and the date header the request uses).
	ErrMalformed = errors.New("sigv4: incomplete signature")

	// ErrUnknownKey means the secret function did not know the access key
	// ID the request was signed with.
	ErrUnknownKey = errors.New("sigv4: unknown access key")

	// ErrExpired means the request's date is more than MaxSkew away from
	// the verifier's clock.
	ErrExpired = errors.New("sigv4: request expired")

	// ErrSignature means the signature does not match the request: the
	// request was changed after signing, was signed with another secret,
	// or was signed for another service or date than it claims.
	ErrSignature = errors.New("sigv4: signature does not match")
)

// Credential is what a verified request was signed with: its access key
// ID and the scope of its credential.
type Credential struct {
	// AccessKeyID is the access key ID the request was signed with.
	AccessKeyID string
	// Date is the scope's date, as yyyymmdd.
	Date string
	// Region is the scope's region, as the client gave it; Verify does
	// not check it.
	Region string
	// Service is the scope's service, which Verify checked.
	Service string
}

const (
	algorithm        = "AWS4-HMAC-SHA256"
	terminator       = "aws4_request"
	unsignedPayload  = "UNSIGNED-PAYLOAD"
	amzDateLayout    = "20060102T150405Z"
	scopeDateLayout  = "20060102"
	maxSignedHeaders = 64
)

// Verify checks the signature in r's Authorization header and returns the
// credential it was made with, or an error that wraps one of ErrMissing,
// ErrMalformed, ErrUnknownKey, ErrExpired and ErrSignature (the returned
// Credential is then the zero value).
//
// body is r's whole body, already read; the caller bounds its size.
// service is the service name the credential scope must name (such as
// "sqs"). secret returns the secret access key of an access key ID, and
// false when the ID is unknown. now is the verifier's clock.
//
// Verify requires:
//   - an Authorization header of the form "AWS4-HMAC-SHA256
//     Credential=ID/yyyymmdd/region/service/aws4_request,
//     SignedHeaders=h1;h2, Signature=hex", its fields in any order;
//   - a credential scope whose service is service and whose date is the
//     date of the request;
//   - the request's date in X-Amz-Date (yyyymmddThhmmssZ) or, failing
//     that, in Date (an HTTP date), within MaxSkew of now;
//   - a SignedHeaders list of at most 64 lower-case names, sorted and
//     without repeats, that includes host and the date header used;
//     other headers, x-amz-* ones included, may be left unsigned;
//   - every X-Amz-Content-Sha256 header, unless it is "UNSIGNED-PAYLOAD",
//     to be the hex SHA-256 of body;
//   - the signature to match, compared in constant time, over a canonical
//     request whose payload hash is the SHA-256 of body (so a request
//     signed with an unsigned payload does not verify).
//
// The host header's value is r.Host (or r.URL.Host when r.Host is empty),
// since net/http moves Host out of r.Header, and content-length's is
// r.ContentLength, the length net/http framed the body with.
func Verify(r *http.Request, body []byte, service string, secret func(accessKeyID string) (string, bool), now time.Time) (Credential, error) {
	a, err := parseAuthorization(r.Header)
	if err != nil {
		return Credential{}, err
	}
	date, err := parseDate(r.Header)
	if err != nil {
		return Credential{}, err
	}
	if !a.signs("host") {
		return Credential{}, fmt.Errorf("%w: SignedHeaders must include host", ErrMalformed)
	}
	if !a.signs(date.header) {
		return Credential{}, fmt.Errorf("%w: SignedHeaders must include %s, the request's date header", ErrMalformed, date.header)
	}
	if a.service != service {
		return Credential{}, fmt.Errorf("%w: the credential is scoped to service %s, not %q", ErrSignature, clip(a.service), service)
	}
	if day := date.t.Format(scopeDateLayout); a.date != day {
		return Credential{}, fmt.Errorf("%w: the credential scope's date %s is not the request's date %s (from %s)", ErrSignature, a.date, day, date.header)
	}
	if skew := now.Sub(date.t); skew > MaxSkew || skew < -MaxSkew {
		return Credential{}, fmt.Errorf("%w: the request's date %s is more than %v from the server's time %s",
			ErrExpired, date.amz, MaxSkew, now.UTC().Format(amzDateLayout))
	}
	key, ok := secret(a.accessKeyID)
	if !ok {
		return Credential{}, fmt.Errorf("%w: access key ID %s", ErrUnknownKey, clip(a.accessKeyID))
	}
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	for _, v := range r.Header.Values("X-Amz-Content-Sha256") {
		if v != unsignedPayload && v != payloadHash {
			return Credential{}, fmt.Errorf("%w: X-Amz-Content-Sha256 is not the SHA-256 of the body", ErrSignature)
		}
	}
	creq, err := canonicalRequest(r, a, payloadHash)
	if err != nil {
		return Credential{}, err
	}
	if !hmac.Equal(a.signature, signature(key, a, date.amz, creq)) {
		return Credential{}, fmt.Errorf("%w: the signature computed for the request does not match the one given; check the secret access key and the signing method", ErrSignature)
	}
	return Credential{AccessKeyID: a.accessKeyID, Date: a.date, Region: a.region, Service: a.service}, nil
}

// authorization is a parsed Authorization header.
type authorization struct {
	accessKeyID, date, region, service string
	// signedHeaders is the SignedHeaders field as given, and headers the
	// names it lists (lower case, sorted, unique).
	signedHeaders string
	headers       []string
	signature     []byte
}

// signs reports whether a's SignedHeaders lists name.
func (a *authorization) signs(name string) bool {
	_, found := slices.BinarySearch(a.headers, name)
	return found
}

// scope is a's credential scope.
func (a *authorization) scope() string {
	return a.date + "/" + a.region + "/" + a.service + "/" + terminator
}

func parseAuthorization(h http.Header) (*authorization, error) {
	values := h.Values("Authorization")
	switch {
	case len(values) == 0 || len(values) == 1 && values[0] == "":
		return nil, fmt.Errorf("%w: the request has no Authorization header", ErrMissing)
	case len(values) > 1:
		return nil, fmt.Errorf("%w: the request has more than one Authorization header", ErrMalformed)
	}
	alg, rest, _ := strings.Cut(values[0], " ")
	if alg != algorithm {
		return nil, fmt.Errorf("%w: the Authorization header's algorithm is not %s", ErrMissing, algorithm)
	}

	var credential, signedHeaders, sig string
	for field := range strings.SplitSeq(rest, ",") {
		field = strings.TrimSpace(field)
		if field == "" {
			continue
		}
		name, value, ok := strings.Cut(field, "=")
		var dst *string
		switch name {
		case "Credential":
			dst = &credential
		case "SignedHeaders":
			dst = &signedHeaders
		case "Signature":
			dst = &sig
		}
		switch {
		case dst == nil || !ok:
			return nil, fmt.Errorf("%w: the Authorization header has a field %s that is not Credential=, SignedHeaders= or Signature=", ErrMalformed, clip(field))
		case *dst != "":
			return nil, fmt.Errorf("%w: the Authorization header repeats %s", ErrMalformed, name)
		case value == "":
			return nil, fmt.Errorf("%w: the Authorization header's %s is empty", ErrMalformed, name)
		}
		*dst = value
	}
	for _, f := range []struct{ name, value string }{{"Credential", credential}, {"SignedHeaders", signedHeaders}, {"Signature", sig}} {
		if f.value == "" {
			return nil, fmt.Errorf("%w: the Authorization header has no %s", ErrMalformed, f.name)
		}
	}

	a := &authorization{signedHeaders: signedHeaders}
	scope := strings.SplitN(credential, "/", 6)
	if len(scope) != 5 || slices.Contains(scope, "") || scope[4] != terminator {
		return nil, fmt.Errorf("%w: Credential %s is not of the form ACCESS_KEY_ID/yyyymmdd/region/service/aws4_request", ErrMalformed, clip(credential))
	}
	a.accessKeyID, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
	if _, err := time.Parse(scopeDateLayout, a.date); err != nil {
		return nil, fmt.Errorf("%w: the credential scope's date %s is not a date of the form yyyymmdd", ErrMalformed, clip(a.date))
	}

	if strings.Count(signedHeaders, ";") >= maxSignedHeaders {
		return nil, fmt.Errorf("%w: SignedHeaders lists more than %d headers", ErrMalformed, maxSignedHeaders)
	}
	a.headers = strings.Split(signedHeaders, ";")
	for i, name := range a.headers {
		if !isLowerToken(name) {
			return nil, fmt.Errorf("%w: SignedHeaders lists %s, which is not a lower-case header name", ErrMalformed, clip(name))
		}
		if i > 0 && a.headers[i-1] >= name {
			return nil, fmt.Errorf("%w: SignedHeaders is not sorted, or lists a header twice", ErrMalformed)
		}
	}

	if len(sig) != 2*sha256.Size || !isLowerHex(sig) {
		return nil, fmt.Errorf("%w: Signature is not %d lower-case hexadecimal digits", ErrMalformed, 2*sha256.Size)
	}
	a.signature, _ = hex.DecodeString(sig)
	return a, nil
}

// requestDate is the date a request was signed at.
type requestDate struct {
	t      time.Time
	amz    string // t as yyyymmddThhmmssZ, for the string to sign
	header string // the header t came from: x-amz-date or date
}

// parseDate returns the date in h's X-Amz-Date header or, when it has
// none, in its Date header.
func parseDate(h http.Header) (requestDate, error) {
	if v := h.Values("X-Amz-Date"); len(v) > 0 {
		if len(v) > 1 {
			return requestDate{}, fmt.Errorf("%w: the request has more than one X-Amz-Date header", ErrMalformed)
		}
		t, err := time.Parse(amzDateLayout, v[0])
		if err != nil {
			return requestDate{}, fmt.Errorf("%w: X-Amz-Date %s is not of the form yyyymmddThhmmssZ", ErrMalformed, clip(v[0]))
		}
		return requestDate{t: t, amz: v[0], header: "x-amz-date"}, nil
	}
	if v := h.Values("Date"); len(v) > 0 {
		if len(v) > 1 {
			return requestDate{}, fmt.Errorf("%w: the request has more than one Date header", ErrMalformed)
		}
		t, err := http.ParseTime(v[0])
		if err != nil {
			return requestDate{}, fmt.Errorf("%w: Date %s is not an HTTP date", ErrMalformed, clip(v[0]))
		}
		t = t.UTC()
		return requestDate{t: t, amz: t.Format(amzDateLayout), header: "date"}, nil
	}
	return requestDate{}, fmt.Errorf("%w: the request has neither an X-Amz-Date nor a Date header", ErrMalformed)
}

// canonicalRequest returns the canonical form of r that a's signature
// signs, with payloadHash as its hashed payload.
func canonicalRequest(r *http.Request, a *authorization, payloadHash string) (string, error) {
	query, err := canonicalQuery(r.URL.RawQuery)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(canonicalURI(r.URL))
	b.WriteByte('\n')
	b.WriteString(query)
	b.WriteByte('\n')
	for _, name := range a.headers {
		b.WriteString(name)
		b.WriteByte(':')
		switch name {
		case "host":
			host := r.Host
			if host == "" {
				host = r.URL.Host
			}
			b.WriteString(canonicalValue(host))
		case "content-length":
			if r.ContentLength < 0 {
				return "", fmt.Errorf("%w: content-length is signed but the request's length is unknown", ErrSignature)
			}
			b.WriteString(strconv.FormatInt(r.ContentLength, 10))
		default:
			values := r.Header.Values(name)
			if len(values) == 0 {
				return "", fmt.Errorf("%w: signed header %s is not in the request", ErrSignature, name)
			}
			for i, v := range values {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(canonicalValue(v))
			}
		}
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(a.signedHeaders)
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String(), nil
}

// canonicalURI returns u's escaped path URI-encoded once more, slashes
// kept: for services other than S3, the path is encoded twice.
func canonicalURI(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		return "/"
	}
	return uriEncode(p, true)
}

// canonicalQuery returns the query string rawQuery with its names and
// values decoded, URI-encoded, and sorted by name, then by value.
func canonicalQuery(rawQuery string) (string, error) {
	if rawQuery == "" {
		return "", nil
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", fmt.Errorf("%w: the query string cannot be parsed: %v", ErrMalformed, err)
	}
	type param struct{ name, value string }
	var params []param
	for name, values := range q {
		name = uriEncode(name, false)
		for _, v := range values {
			params = append(params, param{name, uriEncode(v, false)})
		}
	}
	slices.SortFunc(params, func(x, y param) int {
		return cmp.Or(strings.Compare(x.name, y.name), strings.Compare(x.value, y.value))
	})
	var b strings.Builder
	for i, p := range params {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.name)
		b.WriteByte('=')
		b.WriteString(p.value)
	}
	return b.String(), nil
}

// canonicalValue returns a header value with its runs of spaces collapsed
// to one and its leading and trailing white space removed.
func canonicalValue(v string) string {
	if !strings.Contains(v, "  ") {
		return strings.TrimSpace(v)
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' && i > 0 && v[i-1] == ' ' {
			continue
		}
		b = append(b, v[i])
	}
	return strings.TrimSpace(string(b))
}

// uriEncode percent-encodes, with upper-case hex digits, every byte of s
// outside RFC 3986's unreserved set (A-Z a-z 0-9 - . _ ~), except "/"
// when keepSlash is true.
func uriEncode(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	keep := func(c byte) bool { return isUnreserved(c) || keepSlash && c == '/' }
	n := 0
	for i := 0; i < len(s); i++ {
		if !keep(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		if c := s[i]; keep(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return string(b)
}

// signature returns the signature of the canonical request creq, signed
// at amzDate in a's scope with the secret access key secret.
func signature(secret string, a *authorization, amzDate, creq string) []byte {
	key := hmacSHA256([]byte("AWS4"+secret), a.date)
	key = hmacSHA256(key, a.region)
	key = hmacSHA256(key, a.service)
	key = hmacSHA256(key, terminator)
	h := sha256.Sum256([]byte(creq))
	return hmacSHA256(key, algorithm+"\n"+amzDate+"\n"+a.scope()+"\n"+hex.EncodeToString(h[:]))
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func isUnreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// isLowerToken reports whether s is a non-empty HTTP token (RFC 9110) with
// no upper-case letters.
func isLowerToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// clip quotes s for an error message, cut to 64 bytes: the values it
// quotes come from the client.
func clip(s string) string {
	const limit = 64
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "..."
	}
	return strconv.Quote(s)
}
