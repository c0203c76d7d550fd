package sqstest

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicehq/sluice"
)

// receive long-polls for up to max messages, for at most 10 s.
func receive(t *testing.T, c *sqs.Client, url string, max int32, visibility int32) []types.Message {
	t.Helper()
	out, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: max, WaitTimeSeconds: 10,
		VisibilityTimeout: visibility, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	return out.Messages
}

// receiveNone checks that a short poll finds nothing.
func receiveNone(t *testing.T, c *sqs.Client, url string) {
	t.Helper()
	out, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != 0 {
		t.Fatalf("ReceiveMessage = %d messages, %v; want none", len(out.Messages), err)
	}
}

func bodies(ms []types.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = *m.Body
	}
	return out
}

// attributesMD5 is the digest of message attributes as AWS documents it
// (SQS Developer Guide, "Calculating the MD5 message digest for message
// attributes"), written here apart from the endpoint's own.
func attributesMD5(attrs map[string]types.MessageAttributeValue) string {
	var b []byte
	field := func(v []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		a := attrs[name]
		field([]byte(name))
		field([]byte(*a.DataType))
		if strings.HasPrefix(*a.DataType, "Binary") {
			b = append(b, 2)
			field(a.BinaryValue)
		} else {
			b = append(b, 1)
			field([]byte(*a.StringValue))
		}
	}
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// TestSendReceiveDelete sends with attributes of every type, receives
// them back with their digests and system attributes, and deletes.
func TestSendReceiveDelete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		url := e.createQueue(t, "orders-1", nil)
		attrs := map[string]types.MessageAttributeValue{
			"Kind":          {DataType: aws.String("String"), StringValue: aws.String("order")},
			"Amount":        {DataType: aws.String("Number"), StringValue: aws.String("12.50")},
			"Blob":          {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 255}},
			"Tagged.custom": {DataType: aws.String("String.iso"), StringValue: aws.String("2026-12-06")},
		}
		body := "héllo, wörld \U0001F600"
		sent, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, MessageAttributes: attrs})
		if err != nil {
			t.Fatalf("SendMessage: %v", err) // the SDK checks MD5OfMessageBody itself
		}
		if want := attributesMD5(attrs); aws.ToString(sent.MD5OfMessageAttributes) != want {
			t.Fatalf("SendMessage's MD5OfMessageAttributes = %v, want %s", aws.ToString(sent.MD5OfMessageAttributes), want)
		}
		ms := receive(t, e.sqs, url, 10, 30)
		if len(ms) != 1 {
			t.Fatalf("received %d messages, want 1", len(ms))
		}
		m := ms[0]
		if *m.Body != body || *m.MessageId != *sent.MessageId || *m.MD5OfMessageAttributes != *sent.MD5OfMessageAttributes {
			t.Fatalf("received %q id %s attributes' MD5 %s; sent %q id %s MD5 %s", *m.Body, *m.MessageId, *m.MD5OfMessageAttributes,
				body, *sent.MessageId, *sent.MD5OfMessageAttributes)
		}
		for name, a := range attrs {
			got, ok := m.MessageAttributes[name]
			if !ok || *got.DataType != *a.DataType || aws.ToString(got.StringValue) != aws.ToString(a.StringValue) ||
				!slices.Equal(got.BinaryValue, a.BinaryValue) {
				t.Errorf("attribute %s = %+v, want %+v", name, got, a)
			}
		}
		if m.Attributes["ApproximateReceiveCount"] != "1" || m.Attributes["SenderId"] != "admin" || m.Attributes["SentTimestamp"] == "" {
			t.Errorf("system attributes = %v", m.Attributes)
		}
		if _, err := e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatalf("DeleteMessage: %v", err)
		}
		if st, err := e.lib.GetQueueStats(ctx, "orders-1"); err != nil || st.Active+st.InFlight != 0 {
			t.Fatalf("after DeleteMessage the queue holds %+v, %v", st, err)
		}
		// A stale handle succeeds without deleting anything, as SQS
		// documents; a malformed one is refused.
		if _, err := e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatalf("DeleteMessage with a stale handle: %v", err)
		}
		_, err = e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: aws.String("nonsense")})
		var invalid *types.ReceiptHandleIsInvalid
		if !errors.As(err, &invalid) {
			t.Fatalf("DeleteMessage with a malformed handle = %v, want ReceiptHandleIsInvalid", err)
		}

		// Only the attributes asked for come back.
		if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("b"), MessageAttributes: attrs}); err != nil {
			t.Fatal(err)
		}
		out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 10, MessageAttributeNames: []string{"Tagged.*", "Kind"}})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("ReceiveMessage = %v, %v", out, err)
		}
		if got := out.Messages[0].MessageAttributes; len(got) != 2 || got["Kind"].StringValue == nil || got["Tagged.custom"].StringValue == nil {
			t.Fatalf("attributes asked for by name and prefix = %v", got)
		}
		if out.Messages[0].Attributes != nil {
			t.Fatalf("system attributes nobody asked for: %v", out.Messages[0].Attributes)
		}

		// A message sent through sluice's own API reads as an SQS message
		// whose properties are String attributes.
		s, err := e.lib.NewSender("orders-1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Send(ctx, &sluice.Message{Body: []byte("native"), ApplicationProperties: map[string]string{"origin": "library"}}); err != nil {
			t.Fatal(err)
		}
		ms = receive(t, e.sqs, url, 1, 30)
		if len(ms) != 1 || *ms[0].Body != "native" || aws.ToString(ms[0].MessageAttributes["origin"].StringValue) != "library" || *ms[0].MessageId == "" {
			t.Fatalf("a message sent by the library reads as %+v", ms)
		}
	})
}

// TestSendRefusals checks bad messages: each refused with SQS's error,
// none of them sent.
func TestSendRefusals(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		url := e.createQueue(t, "orders-1", map[string]string{"MaximumMessageSize": "1024"})
		str := func(s string) *string { return &s }
		for _, bad := range []struct {
			what string
			in   sqs.SendMessageInput
			code string
		}{
			{"an empty body", sqs.SendMessageInput{MessageBody: str("")}, "MissingParameter"},
			{"a body with a control character", sqs.SendMessageInput{MessageBody: str("a\x01b")}, "InvalidMessageContents"},
			{"a body over the queue's maximum", sqs.SendMessageInput{MessageBody: str(strings.Repeat("x", 1100))}, "InvalidParameterValue"},
			{"a delay over 15 minutes", sqs.SendMessageInput{MessageBody: str("m"), DelaySeconds: 901}, "InvalidParameterValue"},
			{"a deduplication id on a standard queue", sqs.SendMessageInput{MessageBody: str("m"), MessageDeduplicationId: str("d")}, "InvalidParameterValue"},
			{"an attribute of a reserved name", sqs.SendMessageInput{MessageBody: str("m"), MessageAttributes: map[string]types.MessageAttributeValue{
				"AWS.thing": {DataType: str("String"), StringValue: str("v")}}}, "InvalidParameterValue"},
			{"an attribute of an unknown type", sqs.SendMessageInput{MessageBody: str("m"), MessageAttributes: map[string]types.MessageAttributeValue{
				"a": {DataType: str("Date"), StringValue: str("v")}}}, "InvalidParameterValue"},
			{"a Number that is not one", sqs.SendMessageInput{MessageBody: str("m"), MessageAttributes: map[string]types.MessageAttributeValue{
				"a": {DataType: str("Number"), StringValue: str("twelve")}}}, "InvalidParameterValue"},
			{"a Binary attribute with a string value", sqs.SendMessageInput{MessageBody: str("m"), MessageAttributes: map[string]types.MessageAttributeValue{
				"a": {DataType: str("Binary"), StringValue: str("v")}}}, "InvalidParameterValue"},
		} {
			in := bad.in
			in.QueueUrl = &url
			_, err := e.sqs.SendMessage(ctx, &in)
			wantCode(t, "SendMessage of "+bad.what, err, bad.code)
		}
		// What SQS counts fits: the body and the attributes, not what the
		// endpoint keeps beside them.
		if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: str(strings.Repeat("x", 990)),
			MessageAttributes: map[string]types.MessageAttributeValue{"k": {DataType: str("Number"), StringValue: str("1")}}}); err != nil {
			t.Fatalf("SendMessage of 998 bytes as SQS counts them, to a queue of 1,024: %v", err)
		}
		if _, err := e.sqs.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &url}); err != nil {
			t.Fatal(err)
		}
		eleven := map[string]types.MessageAttributeValue{}
		for i := range 11 {
			eleven[fmt.Sprintf("a%d", i)] = types.MessageAttributeValue{DataType: str("String"), StringValue: str("v")}
		}
		_, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: str("m"), MessageAttributes: eleven})
		wantCode(t, "SendMessage with 11 attributes", err, "InvalidParameterValue")
		if st, err := e.lib.GetQueueStats(ctx, "orders-1"); err != nil || st.Active+st.Scheduled != 0 {
			t.Fatalf("refused sends left %+v, %v", st, err)
		}
	})
}

// TestVisibility checks visibility timeouts: a message comes back when
// its timeout ends, a long one keeps it hidden past any sluice lock, and
// ChangeMessageVisibility renews or ends it.
func TestVisibility(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		url := e.createQueue(t, "orders-1", map[string]string{"VisibilityTimeout": "1"})
		if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m")}); err != nil {
			t.Fatal(err)
		}
		// The queue's timeout of 1 s: received again once it ends.
		first := receive(t, e.sqs, url, 1, 0)
		if len(first) != 1 {
			t.Fatal("nothing received")
		}
		out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 10,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
		if err != nil || len(out.Messages) != 1 || out.Messages[0].Attributes["ApproximateReceiveCount"] != "2" {
			t.Fatalf("receive after the visibility timeout = %+v, %v; want the message a second time", out, err)
		}
		second := out.Messages[0]
		// The first receive's handle no longer changes anything.
		_, err = e.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: first[0].ReceiptHandle, VisibilityTimeout: 60})
		var notInflight *types.MessageNotInflight
		if !errors.As(err, &notInflight) {
			t.Fatalf("ChangeMessageVisibility with a stale handle = %v, want MessageNotInflight", err)
		}
		// Two hours: longer than any lock of sluice's queues.
		if _, err := e.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: second.ReceiptHandle,
			VisibilityTimeout: 7200}); err != nil {
			t.Fatalf("ChangeMessageVisibility(7200): %v", err)
		}
		receiveNone(t, e.sqs, url)
		r, err := e.lib.NewReceiver("orders-1", nil)
		if err != nil {
			t.Fatal(err)
		}
		browse, err := r.Peek(ctx, 10, nil)
		if err != nil || len(browse) != 1 || time.Until(browse[0].LockedUntil) < time.Hour {
			t.Fatalf("the message after a visibility of two hours: %+v, %v", browse, err)
		}
		// 0: visible again at once.
		if _, err := e.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: second.ReceiptHandle,
			VisibilityTimeout: 0}); err != nil {
			t.Fatalf("ChangeMessageVisibility(0): %v", err)
		}
		third := receive(t, e.sqs, url, 1, 7200)
		if len(third) != 1 || third[0].Attributes["ApproximateReceiveCount"] != "3" {
			t.Fatalf("receive after ChangeMessageVisibility(0) = %+v", third)
		}
		for _, bad := range []int32{-1, 43201} {
			_, err := e.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: third[0].ReceiptHandle,
				VisibilityTimeout: bad})
			wantCode(t, fmt.Sprintf("ChangeMessageVisibility(%d)", bad), err, "InvalidParameterValue")
		}
		_, err = e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, VisibilityTimeout: 43201})
		wantCode(t, "ReceiveMessage with a visibility timeout over 12 h", err, "InvalidParameterValue")
		_, err = e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 11})
		wantCode(t, "ReceiveMessage of 11", err, "InvalidParameterValue")
		_, err = e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 21})
		wantCode(t, "ReceiveMessage waiting 21 s", err, "InvalidParameterValue")
	})
}

// TestLongPollAndDelay checks that a long poll returns a message sent
// while it waits, and that a delayed message waits out its delay.
func TestLongPollAndDelay(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		url := e.createQueue(t, "orders-1", nil)
		got := make(chan []types.Message, 1)
		go func() {
			out, err := e.sqs.ReceiveMessage(context.WithoutCancel(ctx), &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20})
			if err != nil {
				t.Errorf("long poll: %v", err)
			}
			got <- out.Messages
		}()
		// Give the poll time to find the queue empty and wait, so that the
		// send wakes it (were it slower, it would find the message at once:
		// the test holds either way).
		time.Sleep(200 * time.Millisecond)
		if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("late")}); err != nil {
			t.Fatal(err)
		}
		if ms := <-got; len(ms) != 1 || *ms[0].Body != "late" {
			t.Fatalf("long poll = %v, want [late]", bodies(ms))
		}

		sent := time.Now()
		if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("delayed"), DelaySeconds: 3}); err != nil {
			t.Fatal(err)
		}
		receiveNone(t, e.sqs, url)
		st, err := e.lib.GetQueueStats(ctx, "orders-1")
		if err != nil || st.Scheduled != 1 {
			t.Fatalf("a delayed message counts %+v, %v; want one scheduled", st, err)
		}
		ms := receive(t, e.sqs, url, 1, 30)
		if len(ms) != 1 || *ms[0].Body != "delayed" || time.Since(sent) < 2900*time.Millisecond {
			t.Fatalf("delayed message = %v after %v", bodies(ms), time.Since(sent))
		}
	})
}

// TestBatches checks the batch actions and their partial failures.
func TestBatches(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		url := e.createQueue(t, "orders-1", nil)
		entries := []types.SendMessageBatchRequestEntry{
			{Id: aws.String("a"), MessageBody: aws.String("one")},
			{Id: aws.String("b"), MessageBody: aws.String("bad\x00")},
			{Id: aws.String("c"), MessageBody: aws.String("three"), DelaySeconds: 0,
				MessageAttributes: map[string]types.MessageAttributeValue{"k": {DataType: aws.String("String"), StringValue: aws.String("v")}}},
		}
		out, err := e.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
		if err != nil {
			t.Fatalf("SendMessageBatch: %v", err)
		}
		if len(out.Successful) != 2 || len(out.Failed) != 1 || *out.Failed[0].Id != "b" || !out.Failed[0].SenderFault ||
			*out.Failed[0].Code != "InvalidMessageContents" {
			t.Fatalf("SendMessageBatch = %d successful, failed %+v; want a and c sent, b failed", len(out.Successful), out.Failed)
		}
		for _, bad := range []struct {
			what    string
			entries []types.SendMessageBatchRequestEntry
			code    string
		}{
			{"no entries", []types.SendMessageBatchRequestEntry{}, "AWS.SimpleQueueService.EmptyBatchRequest"},
			{"two entries of one id", []types.SendMessageBatchRequestEntry{{Id: aws.String("x"), MessageBody: aws.String("1")},
				{Id: aws.String("x"), MessageBody: aws.String("2")}}, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"},
			{"an id with a space", []types.SendMessageBatchRequestEntry{{Id: aws.String("x y"), MessageBody: aws.String("1")}},
				"AWS.SimpleQueueService.InvalidBatchEntryId"},
			{"eleven entries", slices.Repeat([]types.SendMessageBatchRequestEntry{{MessageBody: aws.String("1")}}, 11),
				"AWS.SimpleQueueService.TooManyEntriesInBatchRequest"},
			{"over 1 MiB", []types.SendMessageBatchRequestEntry{{Id: aws.String("x"), MessageBody: aws.String(strings.Repeat("x", 600<<10))},
				{Id: aws.String("y"), MessageBody: aws.String(strings.Repeat("y", 600<<10))}}, "AWS.SimpleQueueService.BatchRequestTooLong"},
		} {
			for i := range bad.entries {
				if bad.entries[i].Id == nil {
					bad.entries[i].Id = aws.String(fmt.Sprint(i))
				}
			}
			_, err := e.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: bad.entries})
			wantCode(t, "SendMessageBatch of "+bad.what, err, bad.code)
		}

		ms := receive(t, e.sqs, url, 10, 60)
		for len(ms) < 2 {
			ms = append(ms, receive(t, e.sqs, url, 10, 60)...)
		}
		if got := bodies(ms); !slices.Equal(got, []string{"one", "three"}) {
			t.Fatalf("received %v, want [one three]", got)
		}
		vis, err := e.sqs.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &url,
			Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
				{Id: aws.String("a"), ReceiptHandle: ms[0].ReceiptHandle, VisibilityTimeout: 120},
				{Id: aws.String("bad"), ReceiptHandle: aws.String("0123456789abcdef0123456789abcdef"), VisibilityTimeout: 120},
			}})
		if err != nil || len(vis.Successful) != 1 || len(vis.Failed) != 1 || *vis.Failed[0].Code != "AWS.SimpleQueueService.MessageNotInflight" &&
			*vis.Failed[0].Code != "MessageNotInflight" {
			t.Fatalf("ChangeMessageVisibilityBatch = %+v, %v", vis, err)
		}
		del, err := e.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: []types.DeleteMessageBatchRequestEntry{
			{Id: aws.String("a"), ReceiptHandle: ms[0].ReceiptHandle},
			{Id: aws.String("c"), ReceiptHandle: ms[1].ReceiptHandle},
			{Id: aws.String("again"), ReceiptHandle: ms[1].ReceiptHandle},
			{Id: aws.String("bad"), ReceiptHandle: aws.String("not-a-handle")},
			{Id: aws.String("zero"), ReceiptHandle: aws.String(strings.Repeat("0", 32))},
		}})
		if err != nil || len(del.Successful) != 3 || len(del.Failed) != 2 || *del.Failed[0].Id != "bad" || *del.Failed[0].Code != "ReceiptHandleIsInvalid" ||
			*del.Failed[1].Id != "zero" || *del.Failed[1].Code != "ReceiptHandleIsInvalid" {
			t.Fatalf("DeleteMessageBatch = %+v, %v", del, err)
		}
		if st, err := e.lib.GetQueueStats(ctx, "orders-1"); err != nil || st.Active+st.InFlight+st.Scheduled != 0 {
			t.Fatalf("after the batch delete the queue holds %+v, %v", st, err)
		}
	})
}

// TestPurgeQueue checks that PurgeQueue deletes the queue's messages.
func TestPurgeQueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		url := e.createQueue(t, "orders-1", nil)
		for i := range 5 {
			if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.sqs.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &url}); err != nil {
			t.Fatalf("PurgeQueue: %v", err)
		}
		receiveNone(t, e.sqs, url)
		got, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil || got.Attributes["ApproximateNumberOfMessages"] != "0" {
			t.Fatalf("after PurgeQueue: %v, %v", got.Attributes, err)
		}
	})
}
