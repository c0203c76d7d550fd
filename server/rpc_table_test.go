package server_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/sluicehq/sluice"
	_ "github.com/sluicehq/sluice/api/sluice/v1" // registers the API's descriptors
	"github.com/sluicehq/sluice/server"
)

// The keys of TestEveryRPC. Each "no*" key holds every permission but
// one on every entity; other holds every permission on entities nobody
// uses; narrow may receive from the queue "orders" and the stream
// namespace "ledger" only; tenant manages what it owns (orders-* and its
// subscriptions of the topic "events") and the consumer "payroll".
const (
	rpcAdmin     = "rpc-admin-token-0123456789"
	rpcNoSend    = "rpc-nosend-token-0123456789"
	rpcNoReceive = "rpc-noreceive-token-0123456789"
	rpcNoManage  = "rpc-nomanage-token-0123456789"
	rpcOther     = "rpc-other-token-0123456789"
	rpcNarrow    = "rpc-narrow-token-0123456789"
	rpcTenant    = "rpc-tenant-token-0123456789"
	// rpcNone is a valid key that grants nothing.
	rpcNone = "rpc-none-token-0123456789"
)

var rpcKeys = []server.Key{
	{Name: "admin", Token: rpcAdmin, Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}},
	{Name: "nosend", Token: rpcNoSend, Grants: []server.Grant{{Actions: server.Receive | server.Manage, Entities: []string{"*"}}}},
	{Name: "noreceive", Token: rpcNoReceive, Grants: []server.Grant{{Actions: server.Send | server.Manage, Entities: []string{"*"}}}},
	{Name: "nomanage", Token: rpcNoManage, Grants: []server.Grant{{Actions: server.Send | server.Receive, Entities: []string{"*"}}}},
	{Name: "other", Token: rpcOther, Grants: []server.Grant{{Actions: server.All, Entities: []string{"other-*"}}}},
	{Name: "narrow", Token: rpcNarrow, Grants: []server.Grant{{Actions: server.Receive, Entities: []string{"orders", "ledger"}}}},
	{Name: "tenant", Token: rpcTenant, Grants: []server.Grant{{Actions: server.All,
		Entities: []string{"orders-*", "events/Subscriptions/orders-*", "payroll"}}}},
	{Name: "none", Token: rpcNone},
	{Name: "metered", Token: rpcMetered, RatePerSecond: 0.001, Burst: 1, Grants: []server.Grant{{Actions: server.Manage,
		Entities: []string{server.MetricsEntity}}}},
	{Name: "biller", Token: rpcBiller, Grants: []server.Grant{{Actions: server.Receive, Entities: []string{"billing", "payments"}}}},
}

// rpcLacking is, for each permission, the key that has every other one.
var rpcLacking = map[server.Action]struct{ name, token string }{
	server.Send:    {"nosend", rpcNoSend},
	server.Receive: {"noreceive", rpcNoReceive},
	server.Manage:  {"nomanage", rpcNoManage},
}

// rpcNames are the names a request carries, at JSON paths ("a.b", "a.0.b"
// into a list), each with the invalid values the server must refuse.
type rpcName struct {
	path string
	bad  []rpcBad
}

// rpcBad is an invalid value, with the reason and the words the refusal
// must carry.
type rpcBad struct{ value, reason, inMessage string }

// isName is an entity, consumer, namespace, group or rule name: letters,
// digits and ".-_/", at most 260 characters.
func isName(path string) rpcName {
	return rpcName{path, []rpcBad{
		{"bad name!", "INVALID_NAME", "bad name!"},
		{strings.Repeat("n", 300), "INVALID_NAME", "at most 260"},
	}}
}

// isID is a stream subscription's id: any text of at
// most 260 bytes.
func isID(path string) rpcName {
	return rpcName{path, []rpcBad{{strings.Repeat("i", 300), "INVALID_ARGUMENT", "at most 260"}}}
}

// isSessionID is a session id: any text of at most 128 characters, as
// Service Bus bounds it.
func isSessionID(path string) rpcName {
	return rpcName{path, []rpcBad{{strings.Repeat("i", 300), "INVALID_ARGUMENT", "at most 128"}}}
}

// isKey is a stream's key: 1 to 1024 bytes.
func isKey(path string) rpcName {
	return rpcName{path, []rpcBad{{strings.Repeat("k", 1100), "INVALID_NAME", "1 to 1024"}}}
}

// rpcCase is an RPC's entry: a valid request, the permission it needs
// and the entity it needs it on, and the names it carries. Placeholders
// in the body ($LOCK...) stand for the fixtures' tokens and numbers.
// A listing that shows only what a key may see says which field names
// each item it lists, and what the narrow key (or narrow, when set) sees;
// one of what is under an entity (under) refuses a key with no
// permission there, rather than list nothing.
type rpcCase struct {
	body   string
	perm   server.Action // 0: none, the call filters instead
	entity string
	names  []rpcName
	list   string
	sees   []string
	narrow string
	under  string
}

// rpcTable has an entry for every RPC of the API, by "Service/Method".
var rpcTable = map[string]rpcCase{
	"EntityService/CreateQueue": {body: `{"name":"orders-new","forwardTo":"orders"}`, perm: server.Manage, entity: "orders-new",
		names: []rpcName{isName("name"), isName("forwardTo")}},
	"EntityService/GetQueue": {body: `{"name":"orders"}`, perm: server.Manage, entity: "orders", names: []rpcName{isName("name")}},
	"EntityService/UpdateQueue": {body: `{"name":"orders","properties":{"maxDeliveryCount":3},"forwardTo":"vault"}`,
		perm: server.Manage, entity: "orders", names: []rpcName{isName("name"), isName("forwardTo")}},
	"EntityService/DeleteQueue": {body: `{"name":"orders"}`, perm: server.Manage, entity: "orders", names: []rpcName{isName("name")}},
	"EntityService/ListQueues":  {body: `{}`, list: "name", sees: []string{"orders"}},
	"EntityService/CreateTopic": {body: `{"name":"events-new"}`, perm: server.Manage, entity: "events-new", names: []rpcName{isName("name")}},
	"EntityService/GetTopic":    {body: `{"name":"events"}`, perm: server.Manage, entity: "events", names: []rpcName{isName("name")}},
	"EntityService/UpdateTopic": {body: `{"name":"events","properties":{"defaultTtl":"60s"}}`, perm: server.Manage, entity: "events",
		names: []rpcName{isName("name")}},
	"EntityService/DeleteTopic": {body: `{"name":"events"}`, perm: server.Manage, entity: "events", names: []rpcName{isName("name")}},
	"EntityService/ListTopics":  {body: `{}`, list: "name", sees: nil},
	"EntityService/CreateSubscription": {body: `{"topic":"events","name":"audit-new","rules":[{"name":"all","trueFilter":{}}]}`,
		perm: server.Manage, entity: "events/Subscriptions/audit-new", names: []rpcName{isName("topic"), isName("name"), isName("rules.0.name")}},
	"EntityService/GetSubscription": {body: `{"topic":"events","name":"audit"}`, perm: server.Manage, entity: "events/Subscriptions/audit",
		names: []rpcName{isName("topic"), isName("name")}},
	"EntityService/UpdateSubscription": {body: `{"topic":"events","name":"audit","properties":{"maxDeliveryCount":3}}`,
		perm: server.Manage, entity: "events/Subscriptions/audit", names: []rpcName{isName("topic"), isName("name")}},
	"EntityService/DeleteSubscription": {body: `{"topic":"events","name":"audit"}`, perm: server.Manage, entity: "events/Subscriptions/audit",
		names: []rpcName{isName("topic"), isName("name")}},
	"EntityService/ListSubscriptions": {body: `{"topic":"events"}`, list: "name", narrow: rpcTenant, sees: []string{"orders-own"},
		under: `may not list the subscriptions of "events"`, names: []rpcName{isName("topic")}},
	"EntityService/CreateRule": {body: `{"topic":"events","subscription":"audit","rule":{"name":"more","trueFilter":{}}}`,
		perm: server.Manage, entity: "events/Subscriptions/audit", names: []rpcName{isName("topic"), isName("subscription"), isName("rule.name")}},
	"EntityService/DeleteRule": {body: `{"topic":"events","subscription":"audit","name":"all"}`, perm: server.Manage,
		entity: "events/Subscriptions/audit", names: []rpcName{isName("topic"), isName("subscription"), isName("name")}},
	"EntityService/GetEntityStats":  {body: `{"entity":"orders"}`, perm: server.Manage, entity: "orders", names: []rpcName{isName("entity")}},
	"EntityService/ListEntityStats": {body: `{}`, list: "entity", sees: []string{"orders"}},

	"MessagingService/Send": {body: `{"entity":"sessions","messages":[{"body":"aGk=","sessionId":"s1"}]}`, perm: server.Send,
		entity: "sessions", names: []rpcName{isName("entity"), isSessionID("messages.0.sessionId")}},
	"MessagingService/CancelScheduled": {body: `{"entity":"orders","sequenceNumbers":["$SCHEDULED"]}`, perm: server.Send, entity: "orders",
		names: []rpcName{isName("entity")}},
	"MessagingService/Receive": {body: `{"entity":"orders","maxMessages":10}`, perm: server.Receive, entity: "orders",
		names: []rpcName{isName("entity")}},
	"MessagingService/ReceiveDeferred": {body: `{"entity":"orders","sequenceNumbers":["$DEFERRED"]}`, perm: server.Receive, entity: "orders",
		names: []rpcName{isName("entity")}},
	"MessagingService/Peek": {body: `{"entity":"orders","maxMessages":10}`, perm: server.Receive, entity: "orders",
		names: []rpcName{isName("entity")}},
	"MessagingService/Complete": {body: `{"entity":"orders","lockToken":"$LOCK"}`, perm: server.Receive, entity: "orders",
		names: []rpcName{isName("entity")}},
	"MessagingService/CompleteBatch": {body: `{"entity":"orders","lockTokens":["$LOCK"]}`, perm: server.Receive, entity: "orders",
		names: []rpcName{isName("entity")}},
	"MessagingService/Abandon": {body: `{"entity":"orders","lockToken":"$LOCK","propertiesToModify":{"a":"b"}}`, perm: server.Receive,
		entity: "orders", names: []rpcName{isName("entity")}},
	"MessagingService/DeadLetter": {body: `{"entity":"orders","lockToken":"$LOCK","reason":"refused"}`, perm: server.Receive,
		entity: "orders", names: []rpcName{isName("entity")}},
	"MessagingService/Defer": {body: `{"entity":"orders","lockToken":"$LOCK"}`, perm: server.Receive, entity: "orders",
		names: []rpcName{isName("entity")}},
	"MessagingService/RenewLock": {body: `{"entity":"orders","lockToken":"$LOCK"}`, perm: server.Receive, entity: "orders",
		names: []rpcName{isName("entity")}},
	"MessagingService/Release": {body: `{"entity":"orders","lockToken":"$LOCK"}`, perm: server.Receive, entity: "orders",
		names: []rpcName{isName("entity")}},
	"MessagingService/AcceptSession": {body: `{"entity":"sessions","sessionId":"s2"}`, perm: server.Receive, entity: "sessions",
		names: []rpcName{isName("entity"), isSessionID("sessionId")}},
	"MessagingService/RenewSessionLock": {body: `{"entity":"sessions","session":{"sessionId":"s1","lockToken":"$SESSION"}}`,
		perm: server.Receive, entity: "sessions", names: []rpcName{isName("entity"), isSessionID("session.sessionId")}},
	"MessagingService/GetSessionState": {body: `{"entity":"sessions","session":{"sessionId":"s1","lockToken":"$SESSION"}}`,
		perm: server.Receive, entity: "sessions", names: []rpcName{isName("entity"), isSessionID("session.sessionId")}},
	"MessagingService/SetSessionState": {body: `{"entity":"sessions","session":{"sessionId":"s1","lockToken":"$SESSION"},"state":"bmV3"}`,
		perm: server.Receive, entity: "sessions", names: []rpcName{isName("entity"), isSessionID("session.sessionId")}},
	"MessagingService/CloseSession": {body: `{"entity":"sessions","session":{"sessionId":"s1","lockToken":"$SESSION"}}`,
		perm: server.Receive, entity: "sessions", names: []rpcName{isName("entity"), isSessionID("session.sessionId")}},
	"MessagingService/ResubmitDeadLetters": {body: `{"entity":"orders","sequenceNumbers":["$DEAD"]}`, perm: server.Manage, entity: "orders",
		names: []rpcName{isName("entity")}},
	"MessagingService/PurgeDeadLetters": {body: `{"entity":"orders"}`, perm: server.Manage, entity: "orders",
		names: []rpcName{isName("entity")}},
	"MessagingService/ListDeadLetterReasons": {body: `{"entity":"orders"}`, perm: server.Manage, entity: "orders",
		names: []rpcName{isName("entity")}},
	"MessagingService/DeleteMessages": {body: `{"entity":"orders","maxMessages":1}`, perm: server.Manage, entity: "orders",
		names: []rpcName{isName("entity")}},
	"MessagingService/PurgeMessages": {body: `{"entity":"orders"}`, perm: server.Manage, entity: "orders",
		names: []rpcName{isName("entity")}},

	"ClusterService/GetClusterStatus": {body: `{}`, perm: server.Manage, entity: server.ClusterEntity},
	"StatsService/GetThroughput":      {body: `{}`, perm: server.Manage, entity: server.MetricsEntity},
	"StatsService/GetEntityHistory": {body: `{"entity":"orders"}`, perm: server.Manage, entity: "orders",
		names: []rpcName{isName("entity")}},
	"StatsService/GetStreamLagHistory": {body: `{"consumer":"billing"}`, perm: server.Manage, entity: server.ClusterEntity,
		names: []rpcName{isName("consumer"), isID("subscription")}},

	"StreamService/Publish": {body: `{"stream":{"namespace":"ledger","key":"k1"},"events":[{"body":"eA=="}]}`, perm: server.Send,
		entity: "ledger", names: []rpcName{isName("stream.namespace"), isKey("stream.key")}},
	"StreamService/Subscribe": {body: `{"stream":{"namespace":"ledger","key":"k1"},"consumer":"payroll","start":"START_POSITION_BEGINNING"}`,
		perm: server.Receive, entity: "ledger", names: []rpcName{isName("stream.namespace"), isKey("stream.key"), isName("consumer")}},
	"StreamService/Unsubscribe": {body: `{"subscription":"$SUB"}`, perm: server.Receive, entity: "billing",
		names: []rpcName{isID("subscription")}},
	"StreamService/GetStreamSubscription": {body: `{"subscription":"$SUB"}`, perm: server.Receive, entity: "billing",
		names: []rpcName{isID("subscription")}},
	"StreamService/ListStreamSubscriptions": {body: `{"stream":{"namespace":"ledger","key":"k1"},"max":10}`, perm: server.Receive,
		entity: "ledger", names: []rpcName{isName("stream.namespace"), isKey("stream.key"), isName("consumer"), isID("consumerPrefix"),
			isID("afterConsumer"), isID("afterId")}, list: "consumer", sees: nil},
	"StreamService/ClearFault": {body: `{"subscription":"$SUB"}`, perm: server.Manage, entity: "billing",
		names: []rpcName{isID("subscription")}},
	"StreamService/ListParkedEvents": {body: `{"subscription":"$SUB"}`, perm: server.Receive, entity: "billing",
		names: []rpcName{isID("subscription")}},
	"StreamService/ReplayParkedEvents": {body: `{"subscription":"$SUB"}`, perm: server.Manage, entity: "billing",
		names: []rpcName{isID("subscription")}},
	"StreamService/SetStreamRetention": {body: `{"namespace":"ledger","maxAge":"3600s"}`, perm: server.Manage, entity: "ledger",
		names: []rpcName{isName("namespace")}},
	"StreamService/Consume": {body: `{"consumer":"payroll","namespace":"ledger","group":"g1","ackTimeout":"600s"}`, perm: server.Receive,
		entity: "payroll", names: []rpcName{isName("consumer"), isName("namespace"), isName("group")}},
	"StreamService/Ack":  {body: `{"deliveryIds":["$DELIVERY"]}`, perm: server.Receive, entity: "billing"},
	"StreamService/Nack": {body: `{"deliveryId":"$DELIVERY","error":"refused"}`, perm: server.Receive, entity: "billing"},
	"StreamService/Tail": {body: `{"namespace":"ledger","key":"k1"}`, perm: server.Receive, entity: "ledger",
		names: []rpcName{isName("namespace"), isKey("key")}},
	"StreamService/RepositionStreamSubscription": {body: `{"subscription":"$SUB","target":"REPOSITION_TARGET_HEAD"}`, perm: server.Manage,
		entity: "ledger", names: []rpcName{isID("subscription")}},
	"StreamService/GetConsumerStats": {body: `{"consumer":"billing"}`, perm: server.Manage, entity: "billing",
		names: []rpcName{isName("consumer")}},
}

// isDuration is a duration field of a request: a negative duration is
// refused (the duration rule, see sluice.Forever), as is the most
// negative protobuf holds.
func isDuration(path string) rpcName {
	return rpcName{path, []rpcBad{
		{"-1s", "INVALID_ARGUMENT", "negative"},
		{"-315576000000s", "INVALID_ARGUMENT", "negative"},
	}}
}

// isCapped is a duration with a Service Bus maximum: also refused past
// it, and beyond time.Duration's range.
func isCapped(path, over, inMessage string) rpcName {
	n := isDuration(path)
	n.bad = append(n.bad, rpcBad{over, "INVALID_ARGUMENT", inMessage}, rpcBad{"315576000000s", "INVALID_ARGUMENT", inMessage})
	return n
}

// receiverLock is a call's lock duration, in place of the entity's: at
// most sluice.MaxReceiverLockDuration.
var receiverLock = isCapped("lockDuration", "43201s", "lock duration")

// rpcDurations are the duration fields of the requests, by RPC (beside
// rpcTable's names).
var rpcDurations = map[string][]rpcName{
	"EntityService/CreateQueue": {isCapped("properties.lockDuration", "301s", "lock duration"), isDuration("properties.defaultTtl"),
		isDuration("properties.deadLetterRetention"), isCapped("properties.duplicateDetectionWindow", "604801s", "duplicate detection window")},
	"EntityService/UpdateQueue": {isCapped("properties.lockDuration", "301s", "lock duration"), isDuration("properties.defaultTtl"),
		isDuration("properties.deadLetterRetention")},
	"EntityService/CreateTopic": {isDuration("properties.defaultTtl"),
		isCapped("properties.duplicateDetectionWindow", "604801s", "duplicate detection window")},
	"EntityService/UpdateTopic": {isDuration("properties.defaultTtl")},
	"EntityService/CreateSubscription": {isCapped("properties.lockDuration", "301s", "lock duration"), isDuration("properties.defaultTtl"),
		isDuration("properties.deadLetterRetention")},
	"EntityService/UpdateSubscription": {isCapped("properties.lockDuration", "301s", "lock duration"), isDuration("properties.defaultTtl"),
		isDuration("properties.deadLetterRetention")},
	"MessagingService/Send":             {isDuration("messages.0.timeToLive")},
	"MessagingService/Receive":          {isDuration("maxWait"), receiverLock},
	"MessagingService/ReceiveDeferred":  {receiverLock},
	"MessagingService/RenewLock":        {receiverLock},
	"MessagingService/AcceptSession":    {isDuration("maxWait"), receiverLock},
	"MessagingService/RenewSessionLock": {receiverLock},
	"StreamService/SetStreamRetention":  {isDuration("maxAge"), isDuration("expiry"), isDuration("parked")},
	"StreamService/Consume":             {isDuration("ackTimeout"), isDuration("retryBackoff"), isDuration("maxRetryBackoff")},
}

// rpcMethod is an RPC of the API, from its descriptor.
type rpcMethod struct {
	name      string // "Service/Method", as post takes it
	streaming bool   // server streaming
}

// everyRPC lists the RPCs of every service of the package sluice.v1, from
// the descriptors the generated code registers.
func everyRPC() []rpcMethod {
	var out []rpcMethod
	protoregistry.GlobalFiles.RangeFilesByPackage("sluice.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			svc := fd.Services().Get(i)
			for j := range svc.Methods().Len() {
				m := svc.Methods().Get(j)
				out = append(out, rpcMethod{name: string(svc.Name()) + "/" + string(m.Name()), streaming: m.IsStreamingServer()})
			}
		}
		return true
	})
	slices.SortFunc(out, func(a, b rpcMethod) int { return strings.Compare(a.name, b.name) })
	return out
}

// rpcFixtures are what the refused calls would change if they were not
// refused: a locked, a deferred, a scheduled and a dead-lettered message
// in the queue "orders" (and one active), a held session "s1" of the
// queue "sessions" with a state and a locked message (and a free session
// "s2"), a topic "events" with the subscription "audit" holding a
// message, and a stream ledger/k1 with an event delivered to the
// consumer "billing" and awaiting its ack; and, for the tenant's key, a
// queue "orders-own", a subscription "orders-own" of "events", and a
// queue "vault" it has no grant on. (No read shows a message's lock's
// end: that RenewLock and RenewSessionLock extended nothing is not
// checked.)
type rpcFixtures struct {
	lock, session, sub, delivery string
	deferred, scheduled, dead    int64
}

// rpcStreamNodes time the server's stream nodes for this test.
var rpcStreamNodes = sluice.StreamProcessorOptions{HeartbeatInterval: 200 * time.Millisecond, FailureTimeout: 3 * time.Second,
	ProgressInterval: 20 * time.Millisecond, RefreshInterval: 100 * time.Millisecond, IdlePollInterval: 100 * time.Millisecond}

// TestEveryRPC calls every RPC of the API over HTTP with the Connect
// protocol in JSON (the server-streaming ones in the Connect streaming
// envelope) and checks that each refuses malformed JSON, an unknown
// field, a call without credentials or with an unknown token, a key
// without the permission the call needs on the entity it names (or, for
// a listing, shows only what the key may see), and each invalid name the
// request carries; and that the refused calls wrote nothing.
func TestEveryRPC(t *testing.T) {
	t.Parallel()
	rpcs := everyRPC()
	if len(rpcs) == 0 {
		t.Fatal("no RPCs registered for the package sluice.v1")
	}
	known := make(map[string]bool)
	for _, m := range rpcs {
		known[m.name] = true
		if _, ok := rpcTable[m.name]; !ok {
			t.Errorf("RPC %s has no entry in rpcTable: add its request body, permission and names", m.name)
		}
	}
	for name := range rpcTable {
		if !known[name] {
			t.Errorf("rpcTable has an entry for %s, which the API does not define", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	logs := &logRecords{}
	e := start(t, "sqlite", server.Config{Keys: rpcKeys, StreamNodes: rpcStreamNodes, Logger: slog.New(logs)})
	fx := setUpRPCFixtures(t, e)
	fill := strings.NewReplacer("$LOCK", fx.lock, "$SESSION", fx.session, "$SUB", fx.sub, "$DELIVERY", fx.delivery,
		"$DEFERRED", strconv.FormatInt(fx.deferred, 10), "$SCHEDULED", strconv.FormatInt(fx.scheduled, 10),
		"$DEAD", strconv.FormatInt(fx.dead, 10))
	before := rpcSnapshot(t, e, fx)

	t.Run("refused", func(t *testing.T) {
		for _, m := range rpcs {
			c := rpcTable[m.name]
			c.body = fill.Replace(c.body)
			t.Run(m.name, func(t *testing.T) {
				t.Parallel()
				checkRPC(t, e, m, c)
			})
		}
	})
	if changed := rpcChanged(before, rpcSnapshot(t, e, fx)); changed != "" {
		t.Errorf("the refused calls changed what the tenant holds:\n%s", changed)
	}
	// The delivery still awaits its ack (no refused Ack or Nack settled
	// it), and the session s2 is free (no refused AcceptSession took it).
	status, body := postRaw(t, e, "StreamService/Ack", rpcAdmin, `{"deliveryIds":["`+fx.delivery+`"]}`)
	if status != http.StatusOK || strings.Contains(body, fx.delivery) {
		t.Errorf("the admin's Ack of the held delivery: %d %s; want it still awaiting settlement", status, body)
	}
	s2, err := e.Lib.AcceptSession(t.Context(), "sessions", "s2", nil)
	if err != nil {
		t.Errorf("session s2 after the refused calls: %v; want it free", err)
	} else if err := s2.Close(t.Context()); err != nil {
		t.Error(err)
	}
	t.Run("refusals logged", func(t *testing.T) { checkRefusalsLogged(t, logs) })
	t.Run("bad values", func(t *testing.T) { checkBadValues(t, e, fx, fill) })
	t.Run("operational endpoints", func(t *testing.T) { checkOperational(t, e) })
	// Last, as they may write when they should not.
	t.Run("two entities", func(t *testing.T) { checkSecondEntities(t, e) })
	t.Run("missing entities", func(t *testing.T) { checkNoProbing(t, e) })
	t.Run("namespace grants", func(t *testing.T) { checkNamespaceGrants(t, e, fx) })
}

// checkRefusalsLogged checks what the refused calls of every RPC left in
// the log: refusals of each kind, with the key's name, and never a token
// in any record.
func checkRefusalsLogged(t *testing.T, logs *logRecords) {
	got := logs.matching("refused")
	for _, want := range []string{"code=unauthenticated", "code=permission_denied", "key="} {
		if !slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, want) }) {
			t.Errorf("no refusal logged with %s among %d:\n%s", want, len(got), strings.Join(got, "\n"))
		}
	}
	for _, l := range logs.matching("") {
		for _, k := range rpcKeys {
			if strings.Contains(l, k.Token) {
				t.Errorf("a log record holds key %q's token: %s", k.Name, l)
			}
		}
	}
}

// checkNoProbing checks that a key learns of an entity's existence only
// where it has a permission: looking up one that is missing, under names
// anyone can guess, it gets the refusal it gets for one that exists, and
// only a key that may act there gets NOT_FOUND.
func checkNoProbing(t *testing.T, e *env) {
	for _, tc := range []struct {
		procedure, body, inMessage string
	}{
		{"EntityService/ListSubscriptions", `{"topic":"no-such-topic"}`, `key "other" may not list the subscriptions of "no-such-topic"`},
		{"StreamService/GetStreamSubscription", `{"subscription":"ns/ledger/no-such-consumer"}`,
			`key "other" may not receive the consumer of "ns/ledger/no-such-consumer"`},
		{"StreamService/ListParkedEvents", `{"subscription":"ns/ledger/billing"}`,
			`key "other" may not receive the consumer of "ns/ledger/billing"`},
		{"StreamService/RepositionStreamSubscription", `{"subscription":"ns/ledger/no-such-consumer","target":"REPOSITION_TARGET_HEAD"}`,
			`key "other" may not manage the namespace of "ns/ledger/no-such-consumer"`},
	} {
		t.Run(tc.procedure, func(t *testing.T) {
			status, ce := post(t, e, tc.procedure, rpcOther, tc.body)
			wantStatus(t, tc.procedure+" "+tc.body, status, ce, http.StatusForbidden, "permission_denied", "", tc.inMessage)
			status, ce = post(t, e, tc.procedure, rpcAdmin, tc.body)
			wantStatus(t, tc.procedure+" "+tc.body+" by the admin", status, ce, http.StatusNotFound, "not_found", "", "")
		})
	}
}

// checkRPC runs the checks of one RPC, each a subtest of its own.
func checkRPC(t *testing.T, e *env, m rpcMethod, c rpcCase) {
	call := func(t *testing.T, token, body string) (int, connectError) {
		t.Helper()
		if m.streaming {
			return rpcCallStream(t, e, m.name, token, body)
		}
		return post(t, e, m.name, token, body)
	}
	// want checks a refusal: the HTTP status of the code for a unary
	// call, 200 with the error at the end of the stream for a streaming
	// one.
	want := func(t *testing.T, what, token, body, code, reason, inMessage string) {
		t.Helper()
		status, ce := call(t, token, body)
		wantHTTP := map[string]int{"invalid_argument": 400, "unauthenticated": 401, "permission_denied": 403}[code]
		if m.streaming {
			wantHTTP = http.StatusOK
		}
		wantStatus(t, what, status, ce, wantHTTP, code, reason, inMessage)
	}

	t.Run("malformed JSON", func(t *testing.T) {
		want(t, "malformed JSON", rpcAdmin, `{"`, "invalid_argument", "", "")
	})
	t.Run("unknown field", func(t *testing.T) {
		want(t, "an unknown field", rpcAdmin, `{"no_such_field": 1}`, "invalid_argument", "", "no_such_field")
	})
	t.Run("no credentials", func(t *testing.T) {
		want(t, "no Authorization header", "", c.body, "unauthenticated", "", "Authorization")
		want(t, "no Authorization header and malformed JSON", "", `{"`, "unauthenticated", "", "Authorization")
		want(t, "an unknown token", "wrong-token-0123456789", c.body, "unauthenticated", "", "unknown token")
	})
	if c.perm != 0 {
		t.Run("missing permission", func(t *testing.T) {
			k := rpcLacking[c.perm]
			want(t, "a key with every permission but "+c.perm.String(), k.token, c.body, "permission_denied", "",
				fmt.Sprintf("key %q may not %s anything: none of its grants gives %s", k.name, c.perm, c.perm))
			want(t, "a key with grants on other entities only", rpcOther, c.body, "permission_denied", "",
				fmt.Sprintf("key %q may not %s %q", "other", c.perm, c.entity))
		})
	}
	t.Run("refused before the body", func(t *testing.T) {
		checkRefusedUnread(t, e, m, rpcNone, `key "none" may not`)
		if c.perm != 0 {
			k := rpcLacking[c.perm]
			checkRefusedUnread(t, e, m, k.token, fmt.Sprintf("key %q may not %s anything", k.name, c.perm))
		}
	})
	if c.list != "" {
		t.Run("listing filtered", func(t *testing.T) {
			all := rpcListed(t, e, m.name, rpcAdmin, c.body, c.list)
			if len(all) <= len(c.sees) {
				t.Fatalf("the admin lists %q: want more than the narrow key's %q, to show the filter", all, c.sees)
			}
			narrow := cmp.Or(c.narrow, rpcNarrow)
			if got := rpcListed(t, e, m.name, narrow, c.body, c.list); !slices.Equal(got, c.sees) {
				t.Errorf("the narrow key lists %q, want %q (of %q)", got, c.sees, all)
			}
			switch {
			case c.under != "":
				want(t, "a key with grants on other entities only", rpcOther, c.body, "permission_denied", "", c.under)
			case c.perm == 0:
				if got := rpcListed(t, e, m.name, rpcOther, c.body, c.list); len(got) != 0 {
					t.Errorf("a key with grants on other entities only lists %q, want nothing", got)
				}
			}
		})
	}
	for _, n := range append(slices.Clone(c.names), rpcDurations[m.name]...) {
		for _, bad := range n.bad {
			body := rpcSetJSON(t, c.body, n.path, bad.value)
			t.Run("invalid "+n.path+" "+rpcShort(bad.value), func(t *testing.T) {
				want(t, "an invalid "+n.path, rpcAdmin, body, "invalid_argument", bad.reason, bad.inMessage)
			})
		}
	}
}

// checkSecondEntities checks the calls that name a second entity, on
// which they need a permission too: a subscription's consumer, a
// consumer's namespace, and the entity a queue or a subscription
// forwards its messages to (forwarding sends there).
func checkSecondEntities(t *testing.T, e *env) {
	for _, tc := range []struct {
		procedure, token, body, inMessage string
		streaming                         bool
	}{
		{"StreamService/Subscribe", rpcNarrow, `{"stream":{"namespace":"ledger","key":"k1"},"consumer":"payroll"}`,
			`key "narrow" may not receive "payroll"`, false},
		{"StreamService/Consume", rpcTenant, `{"consumer":"payroll","namespace":"ledger"}`,
			`key "tenant" may not receive "ledger"`, true},
		{"EntityService/CreateQueue", rpcTenant, `{"name":"orders-fwd","forwardTo":"vault"}`,
			`key "tenant" may not send "vault"`, false},
		{"EntityService/UpdateQueue", rpcTenant, `{"name":"orders-own","forwardTo":"vault"}`,
			`key "tenant" may not send "vault"`, false},
		{"EntityService/CreateSubscription", rpcTenant, `{"topic":"events","name":"orders-fwd","properties":{"forwardTo":"vault"}}`,
			`key "tenant" may not send "vault"`, false},
		{"EntityService/UpdateSubscription", rpcTenant, `{"topic":"events","name":"orders-own","properties":{"forwardTo":"vault"}}`,
			`key "tenant" may not send "vault"`, false},
	} {
		t.Run(tc.procedure, func(t *testing.T) {
			var (
				status int
				ce     connectError
			)
			wantHTTP := http.StatusForbidden
			if tc.streaming {
				status, ce = rpcCallStream(t, e, tc.procedure, tc.token, tc.body)
				wantHTTP = http.StatusOK
			} else {
				status, ce = post(t, e, tc.procedure, tc.token, tc.body)
			}
			wantStatus(t, tc.procedure+" "+tc.body, status, ce, wantHTTP, "permission_denied", "", tc.inMessage)
		})
	}
	// What the tenant sends to the queue it owns stays there: it may not
	// send to vault.
	if status, body := postRaw(t, e, "MessagingService/Send", rpcTenant,
		`{"entity":"orders-own","messages":[{"body":"aGk="}]}`); status != http.StatusOK {
		t.Fatalf("the tenant's Send to its own queue: %d %s", status, body)
	}
	if st, err := e.Lib.GetQueueStats(t.Context(), "vault"); err != nil || st.Active != 0 {
		t.Errorf("vault after the tenant's Send to orders-own: %+v, %v; want nothing in it", st, err)
	}
}

// setUpRPCFixtures writes the fixtures with the library client and holds
// a Consume stream of the consumer "billing" open until the test ends.
func setUpRPCFixtures(t *testing.T, e *env) rpcFixtures {
	t.Helper()
	ctx := t.Context()
	var fx rpcFixtures
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	long := &sluice.QueueProperties{LockDuration: 5 * time.Minute}
	for _, q := range []string{"orders", "vault", "orders-own"} {
		_, err := e.Lib.CreateQueue(ctx, q, long)
		must(err)
	}
	snd, err := e.Lib.NewSender("orders")
	must(err)
	seqs, err := snd.SendBatch(ctx, []*sluice.Message{{Body: []byte("locked")}, {Body: []byte("deferred")}, {Body: []byte("dead")}})
	must(err)
	fx.deferred, fx.dead = seqs[1], seqs[2]
	r, err := e.Lib.NewReceiver("orders", nil)
	must(err)
	ms, err := r.Receive(ctx, 3)
	must(err)
	if len(ms) != 3 {
		t.Fatalf("received %d of the 3 messages", len(ms))
	}
	fx.lock = ms[0].LockToken
	must(r.Defer(ctx, ms[1], nil))
	must(r.DeadLetter(ctx, ms[2], &sluice.DeadLetterOptions{Reason: "fixture"}))
	_, err = snd.Send(ctx, &sluice.Message{Body: []byte("active")})
	must(err)
	fx.scheduled, err = snd.Send(ctx, &sluice.Message{Body: []byte("later"), ScheduledEnqueueTime: time.Now().Add(time.Hour)})
	must(err)

	_, err = e.Lib.CreateQueue(ctx, "sessions", &sluice.QueueProperties{LockDuration: 5 * time.Minute, RequiresSession: true})
	must(err)
	ss, err := e.Lib.NewSender("sessions")
	must(err)
	_, err = ss.SendBatch(ctx, []*sluice.Message{{Body: []byte("s1"), SessionID: "s1"}, {Body: []byte("s2"), SessionID: "s2"}})
	must(err)
	held, err := e.Lib.AcceptSession(ctx, "sessions", "s1", nil)
	must(err)
	fx.session = held.LockToken()
	must(held.SetSessionState(ctx, []byte("kept")))
	if got, err := held.Receive(ctx, 1); err != nil || len(got) != 1 {
		t.Fatalf("the session's Receive = %v, %v", got, err)
	}

	_, err = e.Lib.CreateTopic(ctx, "events", nil)
	must(err)
	for _, s := range []string{"audit", "orders-own"} {
		_, err = e.Lib.CreateSubscription(ctx, "events", s, nil, sluice.Rule{Name: "all", Filter: sluice.TrueFilter{}})
		must(err)
	}
	ts, err := e.Lib.NewSender("events")
	must(err)
	_, err = ts.Send(ctx, &sluice.Message{Body: []byte("event")})
	must(err)

	id := sluice.StreamID{Namespace: "ledger", Key: "k1"}
	_, err = e.Lib.Publish(ctx, id, sluice.Event{Body: []byte("e1")})
	must(err)
	sub, err := e.Lib.Subscribe(ctx, id, "billing", sluice.FromBeginning())
	must(err)
	fx.sub = sub.ID
	fx.delivery = holdDelivery(t, e, `{"consumer":"billing","ackTimeout":"600s"}`)
	return fx
}

// holdDelivery opens a Consume stream with the admin's key, reads until
// its first delivery, and returns the delivery's id; the stream stays
// open, the delivery unsettled, until the test ends.
func holdDelivery(t *testing.T, e *env, body string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := rpcOpenStream(t, ctx, e, "StreamService/Consume", rpcAdmin, body)
	t.Cleanup(func() { cancel(); s.close() })
	deadline := time.AfterFunc(30*time.Second, cancel)
	defer deadline.Stop()
	for {
		msg, end, err := s.next()
		if err != nil || end != nil {
			t.Fatalf("Consume ended before a delivery: %v, %+v", err, end)
		}
		var res struct {
			Delivery *struct {
				DeliveryID string `json:"deliveryId"`
			} `json:"delivery"`
		}
		if err := json.Unmarshal(msg, &res); err != nil {
			t.Fatalf("Consume sent %s: %v", msg, err)
		}
		if res.Delivery != nil {
			return res.Delivery.DeliveryID
		}
	}
}

// rpcSnapshot reads, with the library client, what the tenant holds that
// the refused calls could have changed, as JSON: entities, counts,
// messages with their locks, the held session's state, stream
// subscriptions, parked events, and the partitions' heads and
// subscriptions' positions, each part as JSON.
func rpcSnapshot(t *testing.T, e *env, fx rpcFixtures) map[string]string {
	t.Helper()
	ctx := t.Context()
	var snap struct {
		Queues        []sluice.QueueInfo
		Topics        []sluice.TopicInfo
		Subscriptions []sluice.SubscriptionInfo
		Stats         map[string]sluice.QueueStats
		Messages      map[string][]*sluice.ReceivedMessage
		SessionState  string
		Streams       []sluice.StreamSubscription
		Parked        string
		Partitions    map[int32]string
	}
	var errs []error
	try := func(err error) { errs = append(errs, err) }
	var err error
	snap.Queues, err = e.Lib.ListQueues(ctx, "", 1000)
	try(err)
	snap.Topics, err = e.Lib.ListTopics(ctx, "", 1000)
	try(err)
	for _, tp := range snap.Topics {
		subs, err := e.Lib.ListSubscriptions(ctx, tp.Name)
		try(err)
		snap.Subscriptions = append(snap.Subscriptions, subs...)
	}
	entities := []string{}
	for _, q := range snap.Queues {
		entities = append(entities, q.Name)
	}
	for _, s := range snap.Subscriptions {
		entities = append(entities, sluice.SubscriptionPath(s.Topic, s.Name))
	}
	snap.Stats = make(map[string]sluice.QueueStats)
	snap.Messages = make(map[string][]*sluice.ReceivedMessage)
	for _, name := range entities {
		st, err := e.Lib.GetQueueStats(ctx, name)
		try(err)
		st.OldestAge, st.OldestDeferredAge = 0, 0 // grow with time
		snap.Stats[name] = st
		for _, sq := range []sluice.SubQueue{sluice.SubQueueNone, sluice.SubQueueDeadLetter} {
			r, err := e.Lib.NewReceiver(name, &sluice.ReceiverOptions{SubQueue: sq})
			try(err)
			if err != nil {
				continue
			}
			ms, err := r.Peek(ctx, 100, &sluice.PeekOptions{FromSequenceNumber: 1})
			try(err)
			snap.Messages[fmt.Sprintf("%s/%v", name, sq)] = ms
		}
	}
	if s, err := e.Lib.ResumeSession("sessions", "s1", fx.session, nil); err != nil {
		try(err)
	} else {
		st, err := s.SessionState(ctx)
		try(err)
		snap.SessionState = string(st)
	}
	snap.Streams, err = e.Lib.StreamSubscriptions(ctx, sluice.StreamID{Namespace: "ledger", Key: "k1"})
	try(err)
	sort.Slice(snap.Streams, func(i, j int) bool { return snap.Streams[i].ID < snap.Streams[j].ID })
	parked, err := e.Lib.ParkedEvents(ctx, fx.sub, 100)
	snap.Parked = fmt.Sprint(len(parked), err) // an error if the subscription went
	cs, err := e.Lib.ClusterStatus(ctx)
	try(err)
	snap.Partitions = make(map[int32]string)
	for _, p := range cs.Partitions {
		snap.Partitions[p.Partition] = fmt.Sprintf("head %d", p.Head)
		for _, s := range p.Subscriptions {
			snap.Partitions[p.Partition] += fmt.Sprintf(", %s at %d", s.ID, s.Position)
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("reading the tenant: %v", err)
	}
	out := make(map[string]string)
	for name, v := range map[string]any{"queues": snap.Queues, "topics": snap.Topics, "subscriptions": snap.Subscriptions,
		"counts": snap.Stats, "messages": snap.Messages, "session state": snap.SessionState, "stream subscriptions": snap.Streams,
		"parked events": snap.Parked, "partitions": snap.Partitions} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(b)
	}
	return out
}

// rpcChanged describes what differs between two snapshots.
func rpcChanged(before, after map[string]string) string {
	var out []string
	for name := range before {
		if before[name] != after[name] {
			out = append(out, fmt.Sprintf("%s:\n  before: %s\n  after:  %s", name, before[name], after[name]))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// rpcListed returns what a listing shows the key: the field named of
// each item of the response's list, sorted.
func rpcListed(t *testing.T, e *env, procedure, token, body, field string) []string {
	t.Helper()
	status, raw := postRaw(t, e, procedure, token, body)
	if status != http.StatusOK {
		t.Fatalf("%s: status %d %s", procedure, status, raw)
	}
	var res map[string][]map[string]any
	if err := json.Unmarshal([]byte(raw), &res); err != nil || len(res) > 1 {
		t.Fatalf("%s returned %s, not one list (%v)", procedure, raw, err)
	}
	var out []string
	for _, items := range res {
		for _, it := range items {
			s, _ := it[field].(string)
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// rpcSetJSON returns body with the value at path ("a.b", "a.0.b") set.
func rpcSetJSON(t *testing.T, body, path, value string) string {
	t.Helper()
	var doc any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("the table's body %s: %v", body, err)
	}
	parts := strings.Split(path, ".")
	at := doc
	for i, p := range parts {
		last := i == len(parts)-1
		switch node := at.(type) {
		case map[string]any:
			if last {
				node[p] = value
			} else {
				if node[p] == nil {
					node[p] = map[string]any{} // a message the body leaves out
				}
				at = node[p]
			}
		case []any:
			n, err := strconv.Atoi(p)
			if err != nil || n >= len(node) {
				t.Fatalf("path %s: no item %s in %s", path, p, body)
			}
			if last {
				node[n] = value
			} else {
				at = node[n]
			}
		default:
			t.Fatalf("path %s: nothing at %s in %s", path, p, body)
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// rpcShort names a value in a subtest's name.
func rpcShort(v string) string {
	if len(v) > 20 {
		return fmt.Sprintf("of %d characters", len(v))
	}
	return strconv.Quote(v)
}

// rpcStream is a server-streaming call in the Connect protocol with JSON:
// each message comes in an envelope (a flags byte, a 4-byte big-endian
// length), and the last, flagged 2, carries the call's error if it
// failed.
type rpcStream struct {
	status int
	body   io.ReadCloser
	r      *bufio.Reader
	early  *connectError // the error of a call refused with a non-200 status
}

// rpcOpenStream starts a server-streaming call with one request message.
func rpcOpenStream(t *testing.T, ctx context.Context, e *env, procedure, token, body string) *rpcStream {
	t.Helper()
	env := make([]byte, 5+len(body))
	binary.BigEndian.PutUint32(env[1:5], uint32(len(body)))
	copy(env[5:], body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/sluice.v1."+procedure, strings.NewReader(string(env)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	s := &rpcStream{status: res.StatusCode, body: res.Body, r: bufio.NewReader(res.Body)}
	if res.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(res.Body)
		var ce connectError
		if err := json.Unmarshal(raw, &ce); err != nil {
			t.Fatalf("%s: status %d with a body that is not a Connect error: %q", procedure, res.StatusCode, raw)
		}
		s.early = &ce
	}
	return s
}

// next returns the stream's next message, or its end's error (a zero
// connectError when it ended well).
func (s *rpcStream) next() (json.RawMessage, *connectError, error) {
	if s.early != nil {
		return nil, s.early, nil
	}
	var head [5]byte
	if _, err := io.ReadFull(s.r, head[:]); err != nil {
		return nil, nil, err
	}
	payload := make([]byte, binary.BigEndian.Uint32(head[1:]))
	if _, err := io.ReadFull(s.r, payload); err != nil {
		return nil, nil, err
	}
	if head[0]&2 == 0 {
		return payload, nil, nil
	}
	var end struct {
		Error *connectError `json:"error"`
	}
	if err := json.Unmarshal(payload, &end); err != nil {
		return nil, nil, fmt.Errorf("end of stream %q: %w", payload, err)
	}
	if end.Error == nil {
		end.Error = &connectError{}
	}
	return nil, end.Error, nil
}

func (s *rpcStream) close() { s.body.Close() }

// rpcCallStream makes a server-streaming call that should be refused,
// and returns its HTTP status and the error it ended with; a stream that
// sends messages, or stays open for 10 s, fails the test.
func rpcCallStream(t *testing.T, e *env, procedure, token, body string) (int, connectError) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s := rpcOpenStream(t, ctx, e, procedure, token, body)
	defer s.close()
	for {
		msg, end, err := s.next()
		switch {
		case err != nil:
			t.Fatalf("%s %s: the stream did not end with an error: %v", procedure, body, err)
		case end != nil:
			return s.status, *end
		}
		t.Errorf("%s %s: the stream sent %s", procedure, body, msg)
	}
}
