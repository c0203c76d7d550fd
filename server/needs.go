package server

import (
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/api/sluice/v1/sluicev1connect"
)

// procedureNeeds is the permission each procedure needs on the entity it
// names: a key with no grant of it gets PERMISSION_DENIED before the
// request is read. A procedure not listed (the listings) needs a grant
// of any permission: it shows only what the key may see.
var procedureNeeds = map[string]Action{
	sluicev1connect.EntityServiceCreateQueueProcedure:        Manage,
	sluicev1connect.EntityServiceGetQueueProcedure:           Manage,
	sluicev1connect.EntityServiceUpdateQueueProcedure:        Manage,
	sluicev1connect.EntityServiceDeleteQueueProcedure:        Manage,
	sluicev1connect.EntityServiceCreateTopicProcedure:        Manage,
	sluicev1connect.EntityServiceGetTopicProcedure:           Manage,
	sluicev1connect.EntityServiceUpdateTopicProcedure:        Manage,
	sluicev1connect.EntityServiceDeleteTopicProcedure:        Manage,
	sluicev1connect.EntityServiceCreateSubscriptionProcedure: Manage,
	sluicev1connect.EntityServiceGetSubscriptionProcedure:    Manage,
	sluicev1connect.EntityServiceUpdateSubscriptionProcedure: Manage,
	sluicev1connect.EntityServiceDeleteSubscriptionProcedure: Manage,
	sluicev1connect.EntityServiceCreateRuleProcedure:         Manage,
	sluicev1connect.EntityServiceDeleteRuleProcedure:         Manage,
	sluicev1connect.EntityServiceGetEntityStatsProcedure:     Manage,

	sluicev1connect.MessagingServiceSendProcedure:                  Send,
	sluicev1connect.MessagingServiceCancelScheduledProcedure:       Send,
	sluicev1connect.MessagingServiceReceiveProcedure:               Receive,
	sluicev1connect.MessagingServiceReceiveDeferredProcedure:       Receive,
	sluicev1connect.MessagingServicePeekProcedure:                  Receive,
	sluicev1connect.MessagingServiceCompleteProcedure:              Receive,
	sluicev1connect.MessagingServiceCompleteBatchProcedure:         Receive,
	sluicev1connect.MessagingServiceAbandonProcedure:               Receive,
	sluicev1connect.MessagingServiceDeadLetterProcedure:            Receive,
	sluicev1connect.MessagingServiceDeferProcedure:                 Receive,
	sluicev1connect.MessagingServiceRenewLockProcedure:             Receive,
	sluicev1connect.MessagingServiceReleaseProcedure:               Receive,
	sluicev1connect.MessagingServiceAcceptSessionProcedure:         Receive,
	sluicev1connect.MessagingServiceRenewSessionLockProcedure:      Receive,
	sluicev1connect.MessagingServiceGetSessionStateProcedure:       Receive,
	sluicev1connect.MessagingServiceSetSessionStateProcedure:       Receive,
	sluicev1connect.MessagingServiceCloseSessionProcedure:          Receive,
	sluicev1connect.MessagingServiceResubmitDeadLettersProcedure:   Manage,
	sluicev1connect.MessagingServicePurgeDeadLettersProcedure:      Manage,
	sluicev1connect.MessagingServiceListDeadLetterReasonsProcedure: Manage,
	sluicev1connect.MessagingServiceDeleteMessagesProcedure:        Manage,
	sluicev1connect.MessagingServicePurgeMessagesProcedure:         Manage,

	sluicev1connect.ClusterServiceGetClusterStatusProcedure:  Manage,
	sluicev1connect.StatsServiceGetThroughputProcedure:       Manage,
	sluicev1connect.StatsServiceGetEntityHistoryProcedure:    Manage,
	sluicev1connect.StatsServiceGetStreamLagHistoryProcedure: Manage,

	sluicev1connect.StreamServicePublishProcedure:                      Send,
	sluicev1connect.StreamServiceSubscribeProcedure:                    Receive,
	sluicev1connect.StreamServiceUnsubscribeProcedure:                  Receive,
	sluicev1connect.StreamServiceGetStreamSubscriptionProcedure:        Receive,
	sluicev1connect.StreamServiceListStreamSubscriptionsProcedure:      Receive,
	sluicev1connect.StreamServiceClearFaultProcedure:                   Manage,
	sluicev1connect.StreamServiceListParkedEventsProcedure:             Receive,
	sluicev1connect.StreamServiceReplayParkedEventsProcedure:           Manage,
	sluicev1connect.StreamServiceSetStreamRetentionProcedure:           Manage,
	sluicev1connect.StreamServiceConsumeProcedure:                      Receive,
	sluicev1connect.StreamServiceAckProcedure:                          Receive,
	sluicev1connect.StreamServiceNackProcedure:                         Receive,
	sluicev1connect.StreamServiceTailProcedure:                         Receive,
	sluicev1connect.StreamServiceRepositionStreamSubscriptionProcedure: Manage,
	sluicev1connect.StreamServiceGetConsumerStatsProcedure:             Manage,
}

// holdsAny reports whether one of the key's grants gives a (0: any
// permission) on some entity.
func (k *Key) holdsAny(a Action) bool {
	return slices.ContainsFunc(k.Grants, func(g Grant) bool {
		return g.Actions != 0 && g.Actions&a == a && len(g.Entities) > 0
	})
}

// grantless says, for a denial's message, what a key lacking every grant
// of a (0: any grant) may not do.
func grantless(a Action) string {
	if a == 0 {
		return "call this: it holds no grant"
	}
	return fmt.Sprintf("%s anything: none of its grants gives %s", a, a)
}
