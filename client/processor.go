package client

import "github.com/sluicehq/sluice"

// NewProcessor returns a processor of a queue (or a subscription) through
// the server: sluice.NewMessageProcessor over a receiver of it in
// PeekLock mode, the same *sluice.Processor as the library's, with the
// same options. Start runs it. Its handler is given a
// sluice.MessageReceiver that settles through the server and records what
// the handler settled, so that the processor leaves those messages alone.
// A handler that Stop ended, or a prefetched message let go
// (ProcessorOptions.PrefetchCount), has its message abandoned (the API
// has no release), which counts a delivery. It receives and completes in
// batches, one call each for many messages.
func (c *Client) NewProcessor(queue string, h sluice.MessageHandler, opts *sluice.ProcessorOptions) (*sluice.Processor, error) {
	r, err := c.NewReceiver(queue, nil)
	if err != nil {
		return nil, err
	}
	return sluice.NewMessageProcessor(r, h, opts)
}

// MessageProcessor is NewProcessor, as sluice.Messaging's factory.
func (c *Client) MessageProcessor(entity string, h sluice.MessageHandler, opts *sluice.ProcessorOptions) (*sluice.Processor, error) {
	return c.NewProcessor(entity, h, opts)
}

// NewSessionProcessor returns a session processor of a queue or
// subscription that requires sessions, accepting its sessions through the
// server: sluice.NewSessionProcessor(c, entity, h, opts).
func (c *Client) NewSessionProcessor(entity string, h sluice.SessionHandler, opts *sluice.SessionProcessorOptions) (*sluice.SessionProcessor, error) {
	return sluice.NewSessionProcessor(c, entity, h, opts)
}
