package sqs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// account is the account id in queue URLs and ARNs: sluice has no
// accounts, and SDKs need one.
const account = "000000000000"

// Bounds of SQS's queue attributes, as AWS documents them.
const (
	defaultVisibility = 30 // seconds
	maxVisibility     = 12 * 60 * 60
	defaultRetention  = 4 * 24 * 60 * 60
	minRetention      = 60
	maxRetention      = 14 * 24 * 60 * 60
	maxDelay          = 15 * 60
	maxWait           = 20
	minMessageSize    = 1 << 10
	// maxMessageSize is the largest MaximumMessageSize: SQS's 1 MiB less
	// propertyRoom, so that a message of it fits sluice's default limit
	// (store.DefaultMaxMessageBytes) with what the endpoint keeps beside
	// its attributes.
	maxMessageSize = sluiceMaxMessageSize - propertyRoom
	// sluiceMaxMessageSize is the MaxMessageSize of the queues the
	// endpoint makes.
	sluiceMaxMessageSize = 1 << 20
	// propertyRoom bounds what the endpoint stores beside a message's
	// body and attributes: types of non-String attributes, the sender, a
	// trace header, a group, a FIFO message's ids.
	propertyRoom  = 8 << 10
	maxNameLength = 80
	maxTags       = 50
)

// settings are a queue's SQS attributes beyond sluice's own properties,
// kept as JSON in its UserMetadata under "sqs". A queue made outside the
// endpoint has none: its attributes come from its properties alone.
type settings struct {
	VisibilityTimeout int               `json:"visibilityTimeout"`
	DelaySeconds      int               `json:"delaySeconds,omitempty"`
	ReceiveWait       int               `json:"receiveMessageWaitTimeSeconds,omitempty"`
	Created           int64             `json:"created,omitempty"`
	Modified          int64             `json:"lastModified,omitempty"`
	MaxSize           int               `json:"maximumMessageSize,omitempty"`
	Tags              map[string]string `json:"tags,omitempty"`
	Redrive           *redrivePolicy    `json:"redrive,omitempty"`
	// A FIFO queue's: its messages are sessions' (a MessageGroupId is a
	// SessionID), deduplicated for 5 minutes by MessageDeduplicationId,
	// or by the body's SHA-256 with ContentBasedDeduplication; with
	// DeduplicationScope messageGroup, within their group only.
	Fifo            bool   `json:"fifo,omitempty"`
	ContentDedup    bool   `json:"contentBasedDeduplication,omitempty"`
	DedupScope      string `json:"deduplicationScope,omitempty"`
	ThroughputLimit string `json:"fifoThroughputLimit,omitempty"`
}

// maxSize is the queue's MaximumMessageSize: its SQS setting, or for a
// queue made outside the endpoint its MaxMessageSize.
func (q queue) maxSize() int {
	if q.sqs.MaxSize > 0 {
		return min(q.sqs.MaxSize, q.props.MaxMessageSize)
	}
	return q.props.MaxMessageSize
}

// fifo reports whether q is a FIFO queue: one the endpoint made so (a
// queue of sessions made otherwise is not: its messages need no group).
func (q queue) fifo() bool { return q.sqs.Fifo && q.props.RequiresSession }

// has reports whether the queue's attributes are attrs, as CreateQueue
// of an existing name compares them: only those attrs names.
func (q queue) has(rq *request, attrs map[string]string) bool {
	want := q
	if applyAttributes(&want, attrs) != nil {
		return false
	}
	have, asked := q.attributes(rq), want.attributes(rq)
	for k := range attrs {
		if have[k] != asked[k] {
			return false
		}
	}
	return true
}

// attributes are the queue's settable attributes, as
// GetQueueAttributes shows them.
func (q queue) attributes(rq *request) map[string]string {
	a := map[string]string{
		"VisibilityTimeout":             strconv.Itoa(q.sqs.VisibilityTimeout),
		"DelaySeconds":                  strconv.Itoa(q.sqs.DelaySeconds),
		"ReceiveMessageWaitTimeSeconds": strconv.Itoa(q.sqs.ReceiveWait),
		"MaximumMessageSize":            strconv.Itoa(q.maxSize()),
		"SqsManagedSseEnabled":          "false",
	}
	if q.props.DefaultTTL > 0 && q.props.DefaultTTL < sluice.Forever {
		a["MessageRetentionPeriod"] = strconv.FormatInt(int64(q.props.DefaultTTL/time.Second), 10)
	}
	if q.sqs.Redrive != nil {
		a["RedrivePolicy"] = rq.redriveJSON(q.sqs.Redrive)
	}
	if q.fifo() {
		a["FifoQueue"] = "true"
		a["ContentBasedDeduplication"] = strconv.FormatBool(q.sqs.ContentDedup)
		a["DeduplicationScope"] = q.sqs.DedupScope
		a["FifoThroughputLimit"] = q.sqs.ThroughputLimit
	}
	return a
}

// metadata is the JSON a queue's UserMetadata holds.
type metadata struct {
	SQS *settings `json:"sqs"`
}

// queue is a queue as the endpoint works with it.
type queue struct {
	name  string // canonical
	props sluice.QueueProperties
	sqs   settings
	// foreign is set when the queue's UserMetadata holds text of another
	// program's, which SetQueueAttributes would overwrite.
	foreign bool
}

// load reads a queue's properties and SQS settings.
func load(info sluice.QueueInfo) queue {
	q := queue{name: info.Name, props: info.QueueProperties}
	var md metadata
	if info.UserMetadata != "" {
		if err := json.Unmarshal([]byte(info.UserMetadata), &md); err != nil || md.SQS == nil {
			q.foreign = true
		}
	}
	if md.SQS != nil {
		q.sqs = *md.SQS
	} else {
		q.sqs.VisibilityTimeout = int(q.props.LockDuration / time.Second)
	}
	return q
}

// queueCache keeps queues read within the last second, so that a busy
// queue's sends and receives do not each read its settings; a change
// made through this endpoint is seen at once, one made elsewhere within a
// second (SQS takes up to a minute).
type queueCache struct {
	mu sync.Mutex
	m  map[string]cachedQueue
}

type cachedQueue struct {
	q    queue
	read time.Time
}

const queueCacheTTL = time.Second

// queue returns the queue named by a request's QueueUrl, checking first
// that the key holds p on it.
func (h *Handler) queue(ctx context.Context, rq *request, queueURL string, p Permission) (queue, error) {
	name, err := nameFromURL(queueURL)
	if err != nil {
		return queue{}, err
	}
	if err := rq.authorize(p, name); err != nil {
		return queue{}, err
	}
	return h.lookup(ctx, name)
}

// lookup returns a queue, from the cache when fresh.
func (h *Handler) lookup(ctx context.Context, name string) (queue, error) {
	h.cache.mu.Lock()
	c, ok := h.cache.m[name]
	h.cache.mu.Unlock()
	if ok && time.Since(c.read) < queueCacheTTL {
		return c.q, nil
	}
	info, err := h.c.GetQueue(ctx, name)
	if errors.Is(err, sluice.ErrEntityNotFound) {
		return queue{}, queueDoesNotExist(name)
	}
	if err != nil {
		return queue{}, err
	}
	q := load(info)
	h.cache.mu.Lock()
	if h.cache.m == nil || len(h.cache.m) > 10000 {
		h.cache.m = make(map[string]cachedQueue)
	}
	h.cache.m[name] = cachedQueue{q: q, read: time.Now()}
	h.cache.mu.Unlock()
	return q, nil
}

// forget drops a queue from the cache.
func (h *Handler) forget(name string) {
	h.cache.mu.Lock()
	delete(h.cache.m, name)
	h.cache.mu.Unlock()
}

// fifoSuffix ends the name of every FIFO queue, and of no other.
const fifoSuffix = ".fifo"

// checkName checks an SQS queue name: 1 to 80 letters, digits, '-' and
// '_', a FIFO queue's ending in ".fifo".
func checkName(name string) error {
	base := strings.TrimSuffix(name, fifoSuffix)
	if name == "" || base == "" || len(name) > maxNameLength {
		return invalidParameter("a queue name is 1 to %d characters: %q has %d", maxNameLength, truncate(name, 100), len(name))
	}
	for _, c := range []byte(base) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return invalidParameter("a queue name holds only letters, digits, '-' and '_' (and a FIFO queue's ends in .fifo): %q holds %q",
				truncate(name, 100), c)
		}
	}
	return nil
}

// nameFromURL returns the canonical name of the queue a QueueUrl names:
// its path's last segment (any host and account are taken).
func nameFromURL(queueURL string) (string, error) {
	if queueURL == "" {
		return "", missingParameter("QueueUrl")
	}
	u, err := url.Parse(queueURL)
	if err != nil || u.Path == "" {
		return "", &Error{Code: "InvalidAddress", Status: 404, Message: fmt.Sprintf("%q is not a queue URL", truncate(queueURL, 200))}
	}
	name := u.Path[strings.LastIndexByte(u.Path, '/')+1:]
	if err := checkName(name); err != nil {
		return "", err
	}
	return sluice.CanonicalName(name), nil
}

// url is the queue's URL as the request's host serves it.
func (rq *request) url(name string) string { return rq.base + "/" + account + "/" + name }

// arn is the queue's ARN.
func (rq *request) arn(name string) string {
	return "arn:aws:sqs:" + rq.region + ":" + account + ":" + name
}

// applyAttributes sets SQS attributes on q, checking each against AWS's
// bounds: InvalidAttributeName for an attribute SQS does not have or that
// cannot be set, InvalidAttributeValue for a value out of bounds or one
// sluice cannot honour. FifoQueue is fixed when the queue is created: q
// is FIFO or not already, and FifoQueue may only say so again.
func applyAttributes(q *queue, attrs map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		v := attrs[name]
		switch name {
		case "VisibilityTimeout":
			n, err := intAttribute(name, v, 0, maxVisibility)
			if err != nil {
				return err
			}
			q.sqs.VisibilityTimeout = n
			// A native receiver locks as the queue does: as close as
			// sluice's range allows; the endpoint's receives lock for n.
			q.props.LockDuration = min(max(time.Duration(n)*time.Second, time.Second), sluice.MaxLockDuration)
		case "MessageRetentionPeriod":
			n, err := intAttribute(name, v, minRetention, maxRetention)
			if err != nil {
				return err
			}
			q.props.DefaultTTL = time.Duration(n) * time.Second
		case "DelaySeconds":
			n, err := intAttribute(name, v, 0, maxDelay)
			if err != nil {
				return err
			}
			q.sqs.DelaySeconds = n
		case "ReceiveMessageWaitTimeSeconds":
			n, err := intAttribute(name, v, 0, maxWait)
			if err != nil {
				return err
			}
			q.sqs.ReceiveWait = n
		case "MaximumMessageSize":
			n, err := intAttribute(name, v, minMessageSize, maxMessageSize)
			if err != nil {
				return err
			}
			q.sqs.MaxSize = n
		case "FifoQueue":
			if v != strconv.FormatBool(q.sqs.Fifo) {
				return invalidAttributeValue("FifoQueue %q: a FIFO queue's name ends in .fifo, and FifoQueue is fixed when the queue is created", truncate(v, 20))
			}
		case "ContentBasedDeduplication":
			if !q.sqs.Fifo {
				return invalidAttributeName("ContentBasedDeduplication applies to FIFO queues only")
			}
			b, err := strconv.ParseBool(v)
			if err != nil {
				return invalidAttributeValue("ContentBasedDeduplication %q: true or false", truncate(v, 20))
			}
			q.sqs.ContentDedup = b
		case "DeduplicationScope":
			if !q.sqs.Fifo {
				return invalidAttributeName("DeduplicationScope applies to FIFO queues only")
			}
			if v != "messageGroup" && v != "queue" {
				return invalidAttributeValue("DeduplicationScope %q: messageGroup or queue", truncate(v, 20))
			}
			q.sqs.DedupScope = v
		case "FifoThroughputLimit":
			if !q.sqs.Fifo {
				return invalidAttributeName("FifoThroughputLimit applies to FIFO queues only")
			}
			if v != "perQueue" && v != "perMessageGroupId" {
				return invalidAttributeValue("FifoThroughputLimit %q: perQueue or perMessageGroupId", truncate(v, 20))
			}
			q.sqs.ThroughputLimit = v
		case "RedrivePolicy":
			p, err := parseRedrive(v)
			if err != nil {
				return err
			}
			q.sqs.Redrive = p
		case "SqsManagedSseEnabled":
			if v != "false" {
				return invalidAttributeValue("SqsManagedSseEnabled %q: sluice does not encrypt messages itself (the database's "+
					"encryption at rest applies): set it false or leave it out", v)
			}
		case "RedriveAllowPolicy":
			return unsupported("RedriveAllowPolicy is not served by this endpoint: any queue may name any queue its dead-letter queue")
		case "Policy":
			return invalidAttributeName("Policy: access is granted by the server's keys, not by queue policies")
		case "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds":
			return invalidAttributeName("%s: sluice does not encrypt with KMS (the database's encryption at rest applies)", name)
		default:
			return invalidAttributeName("unknown attribute %q", truncate(name, 100))
		}
	}
	return nil
}

// fnv32 is name's FNV-1a hash, to pick its lock among Handler.changing.
func fnv32(name string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return h.Sum32()
}

// intAttribute parses an integer attribute within [lo, hi].
func intAttribute(name, v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, invalidAttributeValue("%s %q: must be an integer from %d to %d", name, truncate(v, 40), lo, hi)
	}
	return n, nil
}

// newQueue is a queue of SQS's defaults.
func newQueue(name string, fifo bool) queue {
	q := queue{name: name, props: sluice.QueueProperties{
		LockDuration: defaultVisibility * time.Second,
		// Without a redrive policy SQS never dead-letters.
		MaxDeliveryCount: noRedrive,
		DefaultTTL:       defaultRetention * time.Second,
		MaxMessageSize:   sluiceMaxMessageSize,
	}, sqs: settings{VisibilityTimeout: defaultVisibility, MaxSize: maxMessageSize}}
	if fifo {
		q.props.RequiresSession, q.props.RequiresDuplicateDetection = true, true
		q.props.DuplicateDetectionWindow = fifoDedupWindow
		q.sqs.Fifo, q.sqs.DedupScope, q.sqs.ThroughputLimit = true, "queue", "perQueue"
	}
	return q
}

// fifoDedupWindow is SQS's deduplication interval, fixed.
const fifoDedupWindow = 5 * time.Minute

// withMetadata stores q's SQS settings in its properties' UserMetadata.
func (q *queue) withMetadata() (sluice.QueueProperties, error) {
	b, err := json.Marshal(metadata{SQS: &q.sqs})
	if err != nil {
		return sluice.QueueProperties{}, err
	}
	if len(b) > sluice.MaxUserMetadataLength {
		return sluice.QueueProperties{}, invalidParameter("the queue's tags are too long: sluice keeps them with its other settings in "+
			"%d bytes at most", sluice.MaxUserMetadataLength)
	}
	p := q.props
	p.UserMetadata = string(b)
	return p, nil
}

type createQueueInput struct {
	QueueName  string
	Attributes map[string]string
	Tags       map[string]string `json:"tags"`
}

type queueURLOutput struct {
	QueueUrl string
}

func (h *Handler) createQueue(ctx context.Context, rq *request, body []byte) (any, error) {
	var in createQueueInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkName(in.QueueName); err != nil {
		return nil, err
	}
	name := sluice.CanonicalName(in.QueueName)
	if err := rq.authorize(Manage, name); err != nil {
		return nil, err
	}
	if err := checkTags(in.Tags); err != nil {
		return nil, err
	}
	fifo := strings.HasSuffix(in.QueueName, fifoSuffix)
	if v, ok := in.Attributes["FifoQueue"]; ok && v != strconv.FormatBool(fifo) {
		return nil, invalidParameter("FifoQueue %q: a queue is FIFO exactly when its name ends in .fifo", truncate(v, 20))
	}
	if fifo && in.Attributes["FifoQueue"] != "true" {
		return nil, invalidParameter("queue %q: a name ending in .fifo is a FIFO queue's, which needs the attribute FifoQueue true", in.QueueName)
	}
	q := newQueue(name, fifo)
	if err := applyAttributes(&q, in.Attributes); err != nil {
		return nil, err
	}
	if err := h.checkRedrive(ctx, rq, &q); err != nil {
		return nil, err
	}
	now := time.Now().Unix()
	q.sqs.Created, q.sqs.Modified, q.sqs.Tags = now, now, in.Tags
	props, err := q.withMetadata()
	if err != nil {
		return nil, err
	}
	_, err = h.c.CreateQueue(ctx, name, &props)
	if errors.Is(err, sluice.ErrEntityExists) {
		// SQS answers the existing queue's URL when the attributes asked
		// for are the ones it has.
		h.forget(name)
		cur, lerr := h.lookup(ctx, name)
		var e *Error
		if errors.As(lerr, &e) && e.Code == "QueueDoesNotExist" {
			return nil, queueNameExists(name) // a topic's name, say
		}
		if lerr != nil {
			return nil, lerr
		}
		if !cur.has(rq, in.Attributes) {
			return nil, queueNameExists(name)
		}
		return queueURLOutput{QueueUrl: rq.url(name)}, nil
	}
	if err != nil {
		return nil, err
	}
	h.forget(name)
	if q.sqs.Redrive != nil {
		h.forgetRedrive()
	}
	return queueURLOutput{QueueUrl: rq.url(name)}, nil
}

type getQueueURLInput struct {
	QueueName              string
	QueueOwnerAWSAccountId string
}

func (h *Handler) getQueueURL(ctx context.Context, rq *request, body []byte) (any, error) {
	var in getQueueURLInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkName(in.QueueName); err != nil {
		return nil, err
	}
	name := sluice.CanonicalName(in.QueueName)
	if err := rq.authorize(0, name); err != nil {
		return nil, err
	}
	if _, err := h.lookup(ctx, name); err != nil {
		return nil, err
	}
	return queueURLOutput{QueueUrl: rq.url(name)}, nil
}

type listQueuesInput struct {
	QueueNamePrefix string
	NextToken       string
	MaxResults      *int
}

type listQueuesOutput struct {
	QueueUrls []string `json:",omitempty"`
	NextToken string   `json:",omitempty"`
}

// maxListed bounds ListQueues' answer, as SQS's.
const maxListed = 1000

func (h *Handler) listQueues(ctx context.Context, rq *request, body []byte) (any, error) {
	var in listQueuesInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	max, err := intParam("MaxResults", in.MaxResults, maxListed, 1, maxListed)
	if err != nil {
		return nil, err
	}
	if len(in.QueueNamePrefix) > maxNameLength {
		return nil, invalidParameter("QueueNamePrefix is at most %d characters", maxNameLength)
	}
	after := ""
	if in.NextToken != "" {
		b, err := base64.RawURLEncoding.DecodeString(in.NextToken)
		if err != nil || len(b) > 4*maxNameLength {
			return nil, invalidParameter("NextToken is not one ListQueues gave")
		}
		after = string(b)
	}
	prefix := sluice.CanonicalName(in.QueueNamePrefix)
	var out listQueuesOutput
	for {
		page, err := h.c.ListQueuesWithPrefix(ctx, prefix, after, maxListed)
		if err != nil {
			return nil, err
		}
		for _, q := range page {
			after = q.Name
			if checkName(q.Name) != nil || rq.key != nil && !rq.key.Allows(0, q.Name) {
				continue // not a name SQS can show, or not the key's to see
			}
			out.QueueUrls = append(out.QueueUrls, rq.url(q.Name))
			if len(out.QueueUrls) == max {
				if in.MaxResults != nil {
					out.NextToken = base64.RawURLEncoding.EncodeToString([]byte(q.Name))
				}
				return out, nil
			}
		}
		if len(page) < maxListed {
			return out, nil
		}
	}
}

type queueURLInput struct {
	QueueUrl string
}

type empty struct{}

func (h *Handler) deleteQueue(ctx context.Context, rq *request, body []byte) (any, error) {
	var in queueURLInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	name, err := nameFromURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := rq.authorize(Manage, name); err != nil {
		return nil, err
	}
	h.forget(name)
	if err := h.c.DeleteQueue(ctx, name); errors.Is(err, sluice.ErrEntityNotFound) {
		return nil, queueDoesNotExist(name)
	} else if err != nil {
		return nil, err
	}
	h.forget(name)
	h.forgetRedrive()
	return empty{}, nil
}

func (h *Handler) purgeQueue(ctx context.Context, rq *request, body []byte) (any, error) {
	var in queueURLInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, err := h.queue(ctx, rq, in.QueueUrl, Manage)
	if err != nil {
		return nil, err
	}
	if _, err := h.c.PurgeMessages(ctx, q.name, time.Time{}); errors.Is(err, sluice.ErrEntityNotFound) {
		return nil, queueDoesNotExist(q.name)
	} else if err != nil {
		return nil, err
	}
	// A dead-letter queue's messages include its sources' dead letters.
	srcs, err := h.sources(ctx, q.name)
	if err != nil {
		return nil, err
	}
	for _, src := range srcs {
		if _, err := h.c.PurgeDeadLetters(ctx, src); err != nil && !errors.Is(err, sluice.ErrEntityNotFound) {
			return nil, err
		}
	}
	return empty{}, nil
}

type getQueueAttributesInput struct {
	QueueUrl       string
	AttributeNames []string
}

type attributesOutput struct {
	Attributes map[string]string `json:",omitempty"`
}

// readOnly are the attributes GetQueueAttributes shows that no request
// sets.
var readOnly = []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed",
	"CreatedTimestamp", "LastModifiedTimestamp", "QueueArn"}

// settable are the attributes SetQueueAttributes sets (and FifoQueue,
// false).
var settable = []string{"VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds", "ReceiveMessageWaitTimeSeconds", "MaximumMessageSize",
	"SqsManagedSseEnabled", "RedrivePolicy", "FifoQueue", "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"}

func (h *Handler) getQueueAttributes(ctx context.Context, rq *request, body []byte) (any, error) {
	var in getQueueAttributesInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	name, err := nameFromURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := rq.authorize(0, name); err != nil {
		return nil, err
	}
	h.forget(name) // attributes are read fresh
	q, err := h.lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, a := range in.AttributeNames {
		switch {
		case a == "All":
			for _, n := range append(slices.Clone(readOnly), settable...) {
				want[n] = true
			}
		case slices.Contains(readOnly, a) || slices.Contains(settable, a):
			want[a] = true
		case a == "RedriveAllowPolicy", a == "Policy", a == "KmsMasterKeyId", a == "KmsDataKeyReusePeriodSeconds":
			// Attributes SQS has that a standard queue of this endpoint
			// leaves unset: SQS leaves them out of the answer too.
		default:
			return nil, invalidAttributeName("unknown attribute %q", truncate(a, 100))
		}
	}
	out := map[string]string{}
	if want["ApproximateNumberOfMessages"] || want["ApproximateNumberOfMessagesNotVisible"] || want["ApproximateNumberOfMessagesDelayed"] {
		st, err := h.c.GetQueueStats(ctx, name)
		if errors.Is(err, sluice.ErrEntityNotFound) {
			return nil, queueDoesNotExist(name)
		} else if err != nil {
			return nil, err
		}
		set := func(a string, n int64) {
			if want[a] {
				out[a] = strconv.FormatInt(n, 10)
			}
		}
		// A dead-letter queue's messages include its sources' dead
		// letters (locked ones too: sluice counts them as one).
		srcs, err := h.sources(ctx, name)
		if err != nil {
			return nil, err
		}
		for _, src := range srcs {
			dst, err := h.c.GetQueueStats(ctx, src)
			if err != nil && !errors.Is(err, sluice.ErrEntityNotFound) {
				return nil, err
			}
			st.Active += dst.DeadLettered
		}
		set("ApproximateNumberOfMessages", st.Active)
		set("ApproximateNumberOfMessagesNotVisible", st.InFlight)
		set("ApproximateNumberOfMessagesDelayed", st.Scheduled)
	}
	set := func(a, v string) {
		if want[a] {
			out[a] = v
		}
	}
	set("QueueArn", rq.arn(name))
	if q.sqs.Created != 0 {
		set("CreatedTimestamp", strconv.FormatInt(q.sqs.Created, 10))
		set("LastModifiedTimestamp", strconv.FormatInt(q.sqs.Modified, 10))
	}
	for a, v := range q.attributes(rq) {
		set(a, v)
	}
	return attributesOutput{Attributes: out}, nil
}

type setQueueAttributesInput struct {
	QueueUrl   string
	Attributes map[string]string
}

func (h *Handler) setQueueAttributes(ctx context.Context, rq *request, body []byte) (any, error) {
	var in setQueueAttributesInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if len(in.Attributes) == 0 {
		return nil, missingParameter("Attributes")
	}
	if _, ok := in.Attributes["FifoQueue"]; ok {
		return nil, invalidAttributeName("FifoQueue is fixed when a queue is created")
	}
	_, redrive := in.Attributes["RedrivePolicy"]
	err := h.update(ctx, rq, in.QueueUrl, func(q *queue) error {
		was := q.sqs.Redrive
		if err := applyAttributes(q, in.Attributes); err != nil {
			return err
		}
		if !redrive {
			// The MaxDeliveryCount stays: a queue made outside the
			// endpoint keeps its own until a RedrivePolicy is set.
			return nil
		}
		if err := h.checkRedrive(ctx, rq, q); err != nil {
			return err
		}
		if was != nil && (q.sqs.Redrive == nil || q.sqs.Redrive.Target != was.Target) {
			// Its dead letters would be reachable through SQS no more.
			st, err := h.c.GetQueueStats(ctx, q.name)
			if err != nil {
				return err
			}
			if st.DeadLettered > 0 {
				return invalidAttributeValue("RedrivePolicy: %d dead letters of queue %q are in %q still: move them back "+
					"(StartMessageMoveTask) or delete them before the policy names another queue or none", st.DeadLettered, q.name, was.Target)
			}
		}
		return nil
	})
	if redrive {
		h.forgetRedrive()
	}
	if err != nil {
		return nil, err
	}
	return empty{}, nil
}

// update changes the SQS settings of the queue a QueueUrl names, for a
// key that may manage it. Changes to one queue through this node go one
// at a time: each rewrites the queue's settings whole. (Two nodes
// changing one queue at once may still lose one of the changes.)
func (h *Handler) update(ctx context.Context, rq *request, queueURL string, change func(q *queue) error) error {
	name, err := nameFromURL(queueURL)
	if err != nil {
		return err
	}
	if err := rq.authorize(Manage, name); err != nil {
		return err
	}
	mu := &h.changing[fnv32(name)%uint32(len(h.changing))]
	mu.Lock()
	defer mu.Unlock()
	h.forget(name)
	q, err := h.lookup(ctx, name)
	if err != nil {
		return err
	}
	if q.foreign {
		return invalidParameter("queue %q holds UserMetadata of another program's, which the endpoint's settings would overwrite", name)
	}
	if err := change(&q); err != nil {
		return err
	}
	q.sqs.Modified = time.Now().Unix()
	if q.sqs.Created == 0 {
		q.sqs.Created = q.sqs.Modified
	}
	props, err := q.withMetadata()
	if err != nil {
		return err
	}
	_, err = h.c.UpdateQueue(ctx, name, props)
	h.forget(name)
	if errors.Is(err, sluice.ErrEntityNotFound) {
		return queueDoesNotExist(name)
	}
	return err
}
