package cli

import (
	"flag"
	"io"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/sluicehq/sluice/api/sluice/v1" // registers the API's files
)

// rpcCommands names, for each RPC of the network API, the command (and
// the flag of it, if one) that calls it.
var rpcCommands = map[string]string{
	"ClusterService.GetClusterStatus": "cluster status",

	"EntityService.CreateQueue":        "queue create",
	"EntityService.GetQueue":           "queue show",
	"EntityService.UpdateQueue":        "queue update",
	"EntityService.DeleteQueue":        "queue delete",
	"EntityService.ListQueues":         "queue list",
	"EntityService.CreateTopic":        "topic create",
	"EntityService.GetTopic":           "topic show",
	"EntityService.UpdateTopic":        "topic update",
	"EntityService.DeleteTopic":        "topic delete",
	"EntityService.ListTopics":         "topic list",
	"EntityService.CreateSubscription": "subscription create",
	"EntityService.GetSubscription":    "subscription show",
	"EntityService.UpdateSubscription": "subscription update",
	"EntityService.DeleteSubscription": "subscription delete",
	"EntityService.ListSubscriptions":  "subscription list",
	"EntityService.CreateRule":         "rule add",
	"EntityService.DeleteRule":         "rule delete",
	"EntityService.GetEntityStats":     "stats",
	"EntityService.ListEntityStats":    "stats",

	"MessagingService.Send":                  "send",
	"MessagingService.CancelScheduled":       "message cancel-scheduled",
	"MessagingService.Receive":               "receive",
	"MessagingService.ReceiveDeferred":       "receive --deferred",
	"MessagingService.Peek":                  "peek",
	"MessagingService.Complete":              "message complete",
	"MessagingService.CompleteBatch":         "message complete",
	"MessagingService.Abandon":               "message abandon",
	"MessagingService.DeadLetter":            "message dead-letter",
	"MessagingService.Defer":                 "message defer",
	"MessagingService.RenewLock":             "message renew-lock",
	"MessagingService.Release":               "message release",
	"MessagingService.AcceptSession":         "receive --session",
	"MessagingService.RenewSessionLock":      "session renew",
	"MessagingService.GetSessionState":       "session state",
	"MessagingService.SetSessionState":       "session state --set",
	"MessagingService.CloseSession":          "session release",
	"MessagingService.ResubmitDeadLetters":   "dlq resubmit",
	"MessagingService.PurgeDeadLetters":      "dlq purge",
	"MessagingService.ListDeadLetterReasons": "dlq reasons",
	"MessagingService.DeleteMessages":        "message delete",
	"MessagingService.PurgeMessages":         "message purge",

	"StatsService.GetThroughput":       "stats --throughput",
	"StatsService.GetEntityHistory":    "stats --history",
	"StatsService.GetStreamLagHistory": "stream lag --history",

	"StreamService.Publish":                      "stream publish",
	"StreamService.Subscribe":                    "stream subscribe",
	"StreamService.Unsubscribe":                  "stream unsubscribe",
	"StreamService.GetStreamSubscription":        "stream subscription",
	"StreamService.ListStreamSubscriptions":      "stream subscriptions",
	"StreamService.ClearFault":                   "stream clear-fault",
	"StreamService.ListParkedEvents":             "stream parked",
	"StreamService.ReplayParkedEvents":           "stream consume --replay",
	"StreamService.SetStreamRetention":           "stream retention",
	"StreamService.RepositionStreamSubscription": "stream reposition",
	"StreamService.GetConsumerStats":             "stream stats",
	"StreamService.Consume":                      "stream consume",
	"StreamService.Ack":                          "stream consume",
	"StreamService.Nack":                         "stream consume --fail",
	"StreamService.Tail":                         "stream tail",
}

// Every RPC of the API has a command: an RPC added without one fails
// here, and so does a command or flag named here that is gone.
func TestEveryRPCHasACommand(t *testing.T) {
	ops := map[string]*op{}
	for _, o := range operatorOps() {
		ops[o.name] = o
	}
	seen := map[string]bool{}
	protoregistry.GlobalFiles.RangeFilesByPackage("sluice.v1", func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			s := f.Services().Get(i)
			for j := range s.Methods().Len() {
				rpc := string(s.Name()) + "." + string(s.Methods().Get(j).Name())
				seen[rpc] = true
				cmd, ok := rpcCommands[rpc]
				if !ok {
					t.Errorf("RPC %s has no CLI command: add one, and name it in rpcCommands", rpc)
					continue
				}
				name, flagName, _ := strings.Cut(cmd, " --")
				o := ops[name]
				if o == nil {
					t.Errorf("RPC %s: no command %q", rpc, name)
					continue
				}
				if flagName != "" && !hasFlag(o, flagName) {
					t.Errorf("RPC %s: command %q has no flag --%s", rpc, name, flagName)
				}
			}
		}
		return true
	})
	if len(seen) < 50 {
		t.Fatalf("found %d RPCs: the API's files are not registered", len(seen))
	}
	for rpc := range rpcCommands {
		if !seen[rpc] {
			t.Errorf("rpcCommands names %s, which the API does not have", rpc)
		}
	}
}

func hasFlag(o *op, name string) bool {
	if o.flags == nil {
		return false
	}
	fs := flag.NewFlagSet(o.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.flags(fs)
	return fs.Lookup(name) != nil
}
