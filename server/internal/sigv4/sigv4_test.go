package sigv4

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// The AWS documentation's example credentials, which its vectors sign with.
const (
	exampleKey    = "AKIDEXAMPLE"
	exampleSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
)

// readRequest parses raw (lines separated by "\n", no blank line) and body
// the way net/http's server does, so that Host moves out of the header and
// Content-Length into r.ContentLength as they do for a real request.
func readRequest(t testing.TB, raw, body string) *http.Request {
	t.Helper()
	wire := strings.ReplaceAll(raw, "\n", "\r\n") + "\r\n" + body
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(wire)))
	if err != nil {
		t.Fatalf("parsing the request: %v", err)
	}
	return r
}

// TestVerifyKnownVectors verifies requests signed by AWS's published
// examples: the IAM ListUsers example of the SigV4 documentation and cases
// of AWS's SigV4 test suite (those a client can put on the wire as they
// are; the suite's path-normalisation cases are left out, since the SDK
// does not normalise paths).
func TestVerifyKnownVectors(t *testing.T) {
	at := time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)
	const suiteHead = "Host:example.amazonaws.com\nX-Amz-Date:20150830T123600Z\n"
	tests := []struct {
		name, service string
		request, body string // request: the request line and headers
		signedHeaders string
		signature     string
	}{{
		name:    "iam ListUsers",
		service: "iam",
		request: "GET /?Action=ListUsers&Version=2010-05-08 HTTP/1.1\n" +
			"Host: iam.amazonaws.com\n" +
			"Content-Type: application/x-www-form-urlencoded; charset=utf-8\n" +
			"X-Amz-Date: 20150830T123600Z\n",
		signedHeaders: "content-type;host;x-amz-date",
		signature:     "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
	}, {
		name:          "get-vanilla",
		request:       "GET / HTTP/1.1\n" + suiteHead,
		signedHeaders: "host;x-amz-date",
		signature:     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
	}, {
		name:          "get-unreserved",
		request:       "GET /-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz HTTP/1.1\n" + suiteHead,
		signedHeaders: "host;x-amz-date",
		signature:     "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f",
	}, {
		name:          "get-vanilla-query-order-key-case",
		request:       "GET /?Param2=value2&Param1=value1 HTTP/1.1\n" + suiteHead,
		signedHeaders: "host;x-amz-date",
		signature:     "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
	}, {
		name:          "get-vanilla-query-order-value",
		request:       "GET /?Param1=value2&Param1=value1 HTTP/1.1\n" + suiteHead,
		signedHeaders: "host;x-amz-date",
		signature:     "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694",
	}, {
		name:          "get-vanilla-utf8-query",
		request:       "GET /?%E1%88%B4=bar HTTP/1.1\n" + suiteHead,
		signedHeaders: "host;x-amz-date",
		signature:     "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04",
	}, {
		name: "get-header-value-order",
		request: "GET / HTTP/1.1\n" + suiteHead +
			"My-Header1:value4\nMy-Header1:value1\nMy-Header1:value3\nMy-Header1:value2\n",
		signedHeaders: "host;my-header1;x-amz-date",
		signature:     "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01",
	}, {
		name: "get-header-key-duplicate",
		request: "GET / HTTP/1.1\n" + suiteHead +
			"My-Header1:value2\nMy-Header1:value2\nMy-Header1:value1\n",
		signedHeaders: "host;my-header1;x-amz-date",
		signature:     "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea",
	}, {
		name: "get-header-value-trim",
		request: "GET / HTTP/1.1\n" + suiteHead +
			"My-Header1: value1\nMy-Header2: \"a   b   c\"\n",
		signedHeaders: "host;my-header1;my-header2;x-amz-date",
		signature:     "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736",
	}, {
		name: "post-x-www-form-urlencoded",
		request: "POST / HTTP/1.1\n" + suiteHead +
			"Content-Type:application/x-www-form-urlencoded\nContent-Length:13\n",
		body:          "Param1=value1",
		signedHeaders: "content-type;host;x-amz-date",
		signature:     "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
	}}
	secrets := func(id string) (string, bool) { return exampleSecret, id == exampleKey }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			service := cmpOr(tt.service, "service")
			auth := func(sig string) string {
				return fmt.Sprintf("Authorization: AWS4-HMAC-SHA256 Credential=%s/20150830/us-east-1/%s/aws4_request, SignedHeaders=%s, Signature=%s\n",
					exampleKey, service, tt.signedHeaders, sig)
			}
			r := readRequest(t, tt.request+auth(tt.signature), tt.body)
			cred, err := Verify(r, []byte(tt.body), service, secrets, at)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			want := Credential{AccessKeyID: exampleKey, Date: "20150830", Region: "us-east-1", Service: service}
			if cred != want {
				t.Errorf("Verify = %+v, want %+v", cred, want)
			}

			// The same request with its signature's last digit changed.
			other := tt.signature[:len(tt.signature)-1] + "0"
			if other == tt.signature {
				other = tt.signature[:len(tt.signature)-1] + "1"
			}
			r = readRequest(t, tt.request+auth(other), tt.body)
			if _, err := Verify(r, []byte(tt.body), service, secrets, at); !errors.Is(err, ErrSignature) {
				t.Errorf("Verify with another signature: %v, want ErrSignature", err)
			}
		})
	}
}

func cmpOr(s, otherwise string) string {
	if s != "" {
		return s
	}
	return otherwise
}

// testSigner signs a request as aws-sdk-go-v2 does, in code written apart
// from Verify's so that the two can disagree. Its fields other than the
// credentials make it sign wrongly in the ways the tests need.
type testSigner struct {
	key, secret, region, service string
	at                           time.Time
	// headers are the headers signed besides host and the date header.
	headers []string

	scopeDate string // the credential scope's date, instead of at's
	useDate   bool   // date the request with Date instead of X-Amz-Date
	noHost    bool   // do not sign host
	noDate    bool   // do not sign the date header
	unsorted  bool   // list the signed headers in reverse order
}

func (s testSigner) sign(r *http.Request, body []byte) {
	amzDate := s.at.UTC().Format("20060102T150405Z")
	dateHeader := "x-amz-date"
	if s.useDate {
		dateHeader = "date"
		r.Header.Set("Date", s.at.UTC().Format(http.TimeFormat))
	} else {
		r.Header.Set("X-Amz-Date", amzDate)
	}

	var names []string
	if !s.noHost {
		names = append(names, "host")
	}
	if !s.noDate {
		names = append(names, dateHeader)
	}
	for _, h := range s.headers {
		names = append(names, strings.ToLower(h))
	}
	sort.Strings(names)
	if s.unsorted {
		slices.Reverse(names)
	}
	var headers strings.Builder
	for _, name := range names {
		var value string
		switch name {
		case "host":
			value = cmpOr(r.Host, r.URL.Host)
		case "content-length":
			value = fmt.Sprint(r.ContentLength)
		default:
			var values []string
			for _, v := range r.Header[http.CanonicalHeaderKey(name)] {
				values = append(values, strings.Join(strings.Fields(v), " "))
			}
			value = strings.Join(values, ",")
		}
		fmt.Fprintf(&headers, "%s:%s\n", name, value)
	}
	signedHeaders := strings.Join(names, ";")

	var params []string
	for k, vs := range r.URL.Query() {
		for _, v := range vs {
			params = append(params, escapeQuery(k)+"="+escapeQuery(v))
		}
	}
	sort.Strings(params) // enough for the queries these tests sign

	path := cmpOr(r.URL.EscapedPath(), "/")
	path = strings.ReplaceAll(path, "%", "%25") // enough for the paths these tests sign

	bodyHash := sha256.Sum256(body)
	creq := strings.Join([]string{
		r.Method, path, strings.Join(params, "&"), headers.String(), signedHeaders, hex.EncodeToString(bodyHash[:]),
	}, "\n")
	creqHash := sha256.Sum256([]byte(creq))

	day := cmpOr(s.scopeDate, s.at.UTC().Format("20060102"))
	scope := strings.Join([]string{day, s.region, s.service, "aws4_request"}, "/")
	stringToSign := strings.Join([]string{"AWS4-HMAC-SHA256", amzDate, scope, hex.EncodeToString(creqHash[:])}, "\n")
	key := []byte("AWS4" + s.secret)
	for _, part := range []string{day, s.region, s.service, "aws4_request", stringToSign} {
		m := hmac.New(sha256.New, key)
		io.WriteString(m, part)
		key = m.Sum(nil)
	}
	r.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%x",
		s.key, scope, signedHeaders, key))
}

func escapeQuery(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// The round trip's fixtures: an SQS SendMessage as aws-sdk-go-v2 sends it.
var (
	sqsTime   = time.Date(2026, 12, 6, 10, 15, 0, 0, time.UTC)
	sqsBody   = `{"QueueUrl":"http://localhost:9324/000000000000/orders","MessageBody":"hello  world"}`
	sqsSecret = "sqs/Secret+Key"
)

func sqsSecrets(id string) (string, bool) {
	if id == "AKIDSQS" {
		return sqsSecret, true
	}
	return "", false
}

func sqsSigner() testSigner {
	return testSigner{
		key: "AKIDSQS", secret: sqsSecret, region: "us-east-1", service: "sqs", at: sqsTime,
		headers: []string{"amz-sdk-invocation-id", "amz-sdk-request", "content-length", "content-type", "x-amz-security-token", "x-amz-target"},
	}
}

// sqsRequest returns an unsigned SendMessage request with body, as the
// server receives it.
func sqsRequest(body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://localhost:9324/", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/x-amz-json-1.0")
	r.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
	r.Header.Set("Amz-Sdk-Invocation-Id", "5b2c1d1e-7f0a-4c3e-9d55-3c1a2b3c4d5e")
	r.Header.Set("Amz-Sdk-Request", "attempt=1; max=3")
	r.Header.Set("X-Amz-Security-Token", "session-token")
	return r
}

// roundTrip is one request signed by testSigner and verified.
type roundTrip struct {
	signer  testSigner
	r       *http.Request
	body    []byte
	service string
	now     time.Time
}

func newRoundTrip() *roundTrip {
	body := []byte(sqsBody)
	return &roundTrip{signer: sqsSigner(), r: sqsRequest(body), body: body, service: "sqs", now: sqsTime}
}

// setBody replaces the request's body, and its length.
func (rt *roundTrip) setBody(body string) {
	rt.body = []byte(body)
	rt.r.ContentLength = int64(len(body))
}

// setAuth replaces the request's Authorization header.
func (rt *roundTrip) setAuth(f func(auth string) string) {
	rt.r.Header.Set("Authorization", f(rt.r.Header.Get("Authorization")))
}

// hexSHA256 matches what must never appear in an error message: a
// signature or a hash.
var hexSHA256 = regexp.MustCompile(`[0-9a-f]{64}`)

func TestVerifyRoundTrip(t *testing.T) {
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	addHeaders := func(rt *roundTrip, n int) {
		for i := range n {
			name := fmt.Sprintf("X-Extra-%02d", i)
			rt.r.Header.Set(name, "v")
			rt.signer.headers = append(rt.signer.headers, name)
		}
	}
	tests := []struct {
		name   string
		before func(*roundTrip) // before signing
		after  func(*roundTrip) // after signing
		want   error
	}{
		{name: "verifies"},
		{name: "queue path, escaped", before: func(rt *roundTrip) {
			rt.r.URL, _ = url.Parse("/000000000000/my%20queue%2Fx")
		}},
		{name: "query", before: func(rt *roundTrip) { rt.r.URL.RawQuery = "b=2&a=1&a=0&c=x%20y" }},
		{name: "Date instead of X-Amz-Date", before: func(rt *roundTrip) { rt.signer.useDate = true }},
		{name: "no body", before: func(rt *roundTrip) { rt.setBody("") }},
		{name: "X-Amz-Content-Sha256 of the body", before: func(rt *roundTrip) {
			rt.r.Header.Set("X-Amz-Content-Sha256", sum(sqsBody))
			rt.signer.headers = append(rt.signer.headers, "x-amz-content-sha256")
		}},
		{name: "X-Amz-Content-Sha256 UNSIGNED-PAYLOAD", before: func(rt *roundTrip) {
			rt.r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
			rt.signer.headers = append(rt.signer.headers, "x-amz-content-sha256")
		}},
		{name: "64 signed headers", before: func(rt *roundTrip) { addHeaders(rt, 56) }},
		{name: "clock 15 minutes behind", before: func(rt *roundTrip) { rt.now = sqsTime.Add(MaxSkew) }},
		{name: "clock 15 minutes ahead", before: func(rt *roundTrip) { rt.now = sqsTime.Add(-MaxSkew) }},

		{name: "changed body", after: func(rt *roundTrip) { rt.body[len(rt.body)-2] = 'X' }, want: ErrSignature},
		{name: "longer body", after: func(rt *roundTrip) { rt.setBody(sqsBody + " ") }, want: ErrSignature},
		{name: "changed signed header", after: func(rt *roundTrip) {
			rt.r.Header.Set("X-Amz-Target", "AmazonSQS.DeleteQueue")
		}, want: ErrSignature},
		{name: "another value of a signed header", after: func(rt *roundTrip) {
			rt.r.Header.Add("Content-Type", "text/plain")
		}, want: ErrSignature},
		{name: "signed header removed", after: func(rt *roundTrip) { rt.r.Header.Del("X-Amz-Target") }, want: ErrSignature},
		{name: "signed empty header removed", before: func(rt *roundTrip) {
			rt.r.Header.Set("X-Empty", "")
			rt.signer.headers = append(rt.signer.headers, "x-empty")
		}, after: func(rt *roundTrip) { rt.r.Header.Del("X-Empty") }, want: ErrSignature},
		{name: "signed empty header", before: func(rt *roundTrip) {
			rt.r.Header.Set("X-Empty", "")
			rt.signer.headers = append(rt.signer.headers, "x-empty")
		}},
		{name: "changed host", after: func(rt *roundTrip) { rt.r.Host = "localhost:9325" }, want: ErrSignature},
		{name: "changed method", after: func(rt *roundTrip) { rt.r.Method = http.MethodPut }, want: ErrSignature},
		{name: "changed path", after: func(rt *roundTrip) { rt.r.URL.Path = "/000000000000/orders" }, want: ErrSignature},
		{name: "changed query", after: func(rt *roundTrip) { rt.r.URL.RawQuery = "a=1" }, want: ErrSignature},
		{name: "wrong secret", before: func(rt *roundTrip) { rt.signer.secret = "another secret" }, want: ErrSignature},
		{name: "unknown key", before: func(rt *roundTrip) { rt.signer.key = "AKIDOTHER" }, want: ErrUnknownKey},
		{name: "clock 16 minutes behind", before: func(rt *roundTrip) { rt.now = sqsTime.Add(16 * time.Minute) }, want: ErrExpired},
		{name: "clock 16 minutes ahead", before: func(rt *roundTrip) { rt.now = sqsTime.Add(-16 * time.Minute) }, want: ErrExpired},
		{name: "scope date not the X-Amz-Date", before: func(rt *roundTrip) { rt.signer.scopeDate = "20261205" }, want: ErrSignature},
		{name: "scope date not the Date", before: func(rt *roundTrip) {
			rt.signer.useDate = true
			rt.signer.scopeDate = "20261207"
		}, want: ErrSignature},
		{name: "wrong service in scope", before: func(rt *roundTrip) { rt.signer.service = "sns" }, want: ErrSignature},
		{name: "unsorted SignedHeaders", before: func(rt *roundTrip) { rt.signer.unsorted = true }, want: ErrMalformed},
		{name: "repeated signed header", before: func(rt *roundTrip) {
			rt.signer.headers = append(rt.signer.headers, "content-type")
		}, want: ErrMalformed},
		{name: "65 signed headers", before: func(rt *roundTrip) { addHeaders(rt, 57) }, want: ErrMalformed},
		{name: "host not signed", before: func(rt *roundTrip) { rt.signer.noHost = true }, want: ErrMalformed},
		{name: "X-Amz-Date not signed", before: func(rt *roundTrip) { rt.signer.noDate = true }, want: ErrMalformed},
		{name: "Date not signed", before: func(rt *roundTrip) {
			rt.signer.useDate = true
			rt.signer.noDate = true
		}, want: ErrMalformed},
		{name: "X-Amz-Content-Sha256 not the body's", before: func(rt *roundTrip) {
			rt.r.Header.Set("X-Amz-Content-Sha256", sum("another body"))
			rt.signer.headers = append(rt.signer.headers, "x-amz-content-sha256")
		}, want: ErrSignature},
		{name: "X-Amz-Date malformed", after: func(rt *roundTrip) {
			rt.r.Header.Set("X-Amz-Date", "2026-12-06T10:15:00Z")
		}, want: ErrMalformed},
		{name: "no date", after: func(rt *roundTrip) { rt.r.Header.Del("X-Amz-Date") }, want: ErrMalformed},
		{name: "garbage Authorization", after: func(rt *roundTrip) {
			rt.setAuth(func(string) string { return "garbage" })
		}, want: ErrMissing},
		{name: "garbage after the algorithm", after: func(rt *roundTrip) {
			rt.setAuth(func(string) string { return "AWS4-HMAC-SHA256 garbage" })
		}, want: ErrMalformed},
		{name: "algorithm alone", after: func(rt *roundTrip) {
			rt.setAuth(func(string) string { return "AWS4-HMAC-SHA256" })
		}, want: ErrMalformed},
		{name: "empty Authorization", after: func(rt *roundTrip) {
			rt.setAuth(func(string) string { return "" })
		}, want: ErrMissing},
		{name: "no Authorization", after: func(rt *roundTrip) { rt.r.Header.Del("Authorization") }, want: ErrMissing},
		{name: "two Authorization headers", after: func(rt *roundTrip) {
			rt.r.Header.Add("Authorization", rt.r.Header.Get("Authorization"))
		}, want: ErrMalformed},
		{name: "SigV4a", after: func(rt *roundTrip) {
			rt.setAuth(func(a string) string { return strings.Replace(a, "AWS4-HMAC-SHA256", "AWS4-ECDSA-P256-SHA256", 1) })
		}, want: ErrMissing},
		{name: "fields reordered", after: func(rt *roundTrip) {
			rt.setAuth(func(a string) string {
				alg, fields, _ := strings.Cut(a, " ")
				f := strings.Split(fields, ", ")
				slices.Reverse(f)
				return alg + " " + strings.Join(f, ",")
			})
		}},
		{name: "field repeated", after: func(rt *roundTrip) {
			rt.setAuth(func(a string) string { return a + ", SignedHeaders=host;x-amz-date" })
		}, want: ErrMalformed},
		{name: "unknown field", after: func(rt *roundTrip) {
			rt.setAuth(func(a string) string { return a + ", Expires=60" })
		}, want: ErrMalformed},
		{name: "no Signature", after: func(rt *roundTrip) {
			rt.setAuth(func(a string) string { a, _, _ = strings.Cut(a, ", Signature="); return a })
		}, want: ErrMalformed},
		{name: "upper-case Signature", after: func(rt *roundTrip) {
			rt.setAuth(func(a string) string {
				a, sig, _ := strings.Cut(a, "Signature=")
				return a + "Signature=" + strings.ToUpper(sig)
			})
		}, want: ErrMalformed},
		{name: "short Signature", after: func(rt *roundTrip) {
			rt.setAuth(func(a string) string { return a[:len(a)-2] })
		}, want: ErrMalformed},
		{name: "scope without aws4_request", after: func(rt *roundTrip) {
			rt.setAuth(func(a string) string { return strings.Replace(a, "/aws4_request", "/aws5_request", 1) })
		}, want: ErrMalformed},
		{name: "scope without region", after: func(rt *roundTrip) {
			rt.setAuth(func(a string) string { return strings.Replace(a, "/us-east-1/", "/", 1) })
		}, want: ErrMalformed},
		{name: "scope date malformed", after: func(rt *roundTrip) {
			rt.setAuth(func(a string) string { return strings.Replace(a, "/20261206/", "/2026126/", 1) })
		}, want: ErrMalformed},
		{name: "upper-case signed header", after: func(rt *roundTrip) {
			// Still sorted, the first name being upper-case.
			rt.setAuth(func(a string) string { return strings.Replace(a, "amz-sdk-invocation-id", "Amz-Sdk-Invocation-Id", 1) })
		}, want: ErrMalformed},
		{name: "empty signed header", after: func(rt *roundTrip) {
			rt.setAuth(func(a string) string { return strings.Replace(a, "SignedHeaders=", "SignedHeaders=;", 1) })
		}, want: ErrMalformed},
	}
	sentinels := []error{ErrMissing, ErrMalformed, ErrUnknownKey, ErrExpired, ErrSignature}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newRoundTrip()
			if tt.before != nil {
				tt.before(rt)
			}
			rt.signer.sign(rt.r, rt.body)
			if tt.after != nil {
				tt.after(rt)
			}
			cred, err := Verify(rt.r, rt.body, rt.service, sqsSecrets, rt.now)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				want := Credential{AccessKeyID: "AKIDSQS", Date: "20261206", Region: "us-east-1", Service: "sqs"}
				if cred != want {
					t.Errorf("Verify = %+v, want %+v", cred, want)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify: %v, want %v", err, tt.want)
			}
			for _, s := range sentinels {
				if s != tt.want && errors.Is(err, s) {
					t.Errorf("Verify: %v is also %v", err, s)
				}
			}
			if cred != (Credential{}) {
				t.Errorf("Verify failed but returned %+v", cred)
			}
			if msg := err.Error(); strings.Contains(msg, sqsSecret) || hexSHA256.MatchString(msg) {
				t.Errorf("Verify's error shows a secret, a signature or a hash: %s", msg)
			}
		})
	}
}

// TestVerifyUnsignedHeaders checks that headers added after signing, which
// the signature does not cover, do not stop a request from verifying.
func TestVerifyUnsignedHeaders(t *testing.T) {
	rt := newRoundTrip()
	rt.signer.sign(rt.r, rt.body)
	rt.r.Header.Set("User-Agent", "aws-sdk-go-v2/1.41.0")
	rt.r.Header.Set("X-Amz-Meta-Unsigned", "x")
	rt.r.Header.Set("X-Amzn-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793")
	rt.r.Header.Set("X-Forwarded-For", "10.0.0.1")
	rt.r.Header.Set("Amz-Sdk-Request-Extra", "x")
	if _, err := Verify(rt.r, rt.body, "sqs", sqsSecrets, sqsTime); err != nil {
		t.Fatalf("Verify with unsigned headers added: %v", err)
	}
	// And the same headers, had they been signed, would be checked.
	rt.r.Header.Set("X-Amz-Meta-Unsigned", "y")
	rt.signer.headers = append(rt.signer.headers, "x-amz-meta-unsigned")
	rt.signer.sign(rt.r, rt.body)
	rt.r.Header.Set("X-Amz-Meta-Unsigned", "x")
	if _, err := Verify(rt.r, rt.body, "sqs", sqsSecrets, sqsTime); !errors.Is(err, ErrSignature) {
		t.Fatalf("Verify with a signed header changed: %v, want ErrSignature", err)
	}
}

// TestVerifyOverHTTP signs a request on the client side of a real HTTP
// exchange and verifies it on the server side, where net/http has moved
// Host and Content-Length out of the header and added headers of its own
// (User-Agent, Accept-Encoding) after signing.
func TestVerifyOverHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		cred, err := Verify(r, body, "sqs", sqsSecrets, sqsTime)
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		fmt.Fprint(w, cred.AccessKeyID)
	}))
	defer srv.Close()

	for _, target := range []string{"/", "/000000000000/orders", "/000000000000/my%20queue?Action=x&b=a%2Fb"} {
		body := []byte(sqsBody)
		req, err := http.NewRequest(http.MethodPost, srv.URL+target, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = sqsRequest(nil).Header
		sqsSigner().sign(req, body)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != "AKIDSQS" {
			t.Errorf("POST %s: %s %s", target, resp.Status, got)
		}
	}
}

func TestCanonicalURI(t *testing.T) {
	tests := []struct{ target, want string }{
		{"", "/"},
		{"/", "/"},
		{"/000000000000/orders", "/000000000000/orders"},
		{"/-._~09AZaz", "/-._~09AZaz"},
		{"/my%20queue", "/my%2520queue"},
		{"/a%2Fb/c", "/a%252Fb/c"},
		{"/a:b@c+d", "/a%3Ab%40c%2Bd"},
		{"/%E1%88%B4", "/%25E1%2588%25B4"},
		{"/q//a/./b/../", "/q//a/./b/../"}, // not normalised, as the SDK does not
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.target)
		if err != nil {
			t.Fatal(err)
		}
		if got := canonicalURI(u); got != tt.want {
			t.Errorf("canonicalURI(%q) = %q, want %q", tt.target, got, tt.want)
		}
	}
}

func TestCanonicalQuery(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"", ""},
		{"Param2=value2&Param1=value1", "Param1=value1&Param2=value2"},
		{"a=10&a=9", "a=10&a=9"},
		{"x=a.b&x=a%2Fb", "x=a%2Fb&x=a.b"}, // sorted after encoding
		{"a-=1&a=2", "a=2&a-=1"},           // by name, then by value
		{"q=a+b", "q=a%20b"},
		{"q=a%2Bb", "q=a%2Bb"},
		{"b&a=1", "a=1&b="},
		{"a=1=2", "a=1%3D2"},
		{"k~=v~*", "k~=v~%2A"},
	}
	for _, tt := range tests {
		got, err := canonicalQuery(tt.raw)
		if err != nil || got != tt.want {
			t.Errorf("canonicalQuery(%q) = %q, %v, want %q", tt.raw, got, err, tt.want)
		}
	}
	for _, raw := range []string{"a=1;b=2", "a=%zz"} {
		if _, err := canonicalQuery(raw); !errors.Is(err, ErrMalformed) {
			t.Errorf("canonicalQuery(%q): %v, want ErrMalformed", raw, err)
		}
	}
}

func TestCanonicalValue(t *testing.T) {
	tests := []struct{ v, want string }{
		{"", ""},
		{"   ", ""},
		{"value1", "value1"},
		{" value1 ", "value1"},
		{`"a   b   c"`, `"a b c"`},
		{"attempt=1;  max=3", "attempt=1; max=3"},
		{"a\t\tb", "a\t\tb"},
	}
	for _, tt := range tests {
		if got := canonicalValue(tt.v); got != tt.want {
			t.Errorf("canonicalValue(%q) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

// FuzzVerify checks that Verify does not panic on any Authorization header
// and body, that its errors are always one of the sentinels, and that it
// accepts only the signature the signer makes for the body.
func FuzzVerify(f *testing.F) {
	signed := func(body []byte) string {
		r := sqsRequest(body)
		sqsSigner().sign(r, body)
		return r.Header.Get("Authorization")
	}
	body := []byte(sqsBody)
	auth := signed(body)
	f.Add(auth, body)
	f.Add(auth, []byte(sqsBody+" "))
	f.Add(auth, []byte{})
	f.Add(signed(nil), []byte{})
	f.Add(strings.ReplaceAll(auth, ", ", ","), body)
	f.Add(strings.Replace(auth, "content-length;", "", 1), body)
	f.Add("", body)
	f.Add("AWS4-HMAC-SHA256", body)
	f.Add("AWS4-HMAC-SHA256 Credential=//////, SignedHeaders=;;, Signature=", body)
	f.Add("AWS4-HMAC-SHA256 Credential=AKIDSQS/20261206/us-east-1/sqs/aws4_request, SignedHeaders=host;x-amz-date, Signature="+strings.Repeat("0", 64), body)

	sentinels := []error{ErrMissing, ErrMalformed, ErrUnknownKey, ErrExpired, ErrSignature}
	f.Fuzz(func(t *testing.T, auth string, body []byte) {
		r := sqsRequest(body)
		sqsSigner().sign(r, body)
		r.Header["Authorization"] = []string{auth}
		cred, err := Verify(r, body, "sqs", sqsSecrets, sqsTime)
		if err != nil {
			if !slices.ContainsFunc(sentinels, func(s error) bool { return errors.Is(err, s) }) {
				t.Fatalf("Verify: %v, which is none of the sentinels", err)
			}
			return
		}
		_, want, _ := strings.Cut(signed(body), "Signature=")
		if !strings.Contains(auth, "Signature="+want) {
			t.Fatalf("Verify accepted %q, which has not the signature the signer makes for body %q", auth, body)
		}
		if cred.AccessKeyID != "AKIDSQS" || cred.Service != "sqs" {
			t.Fatalf("Verify = %+v", cred)
		}
	})
}
