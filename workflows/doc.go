// Package workflows holds the agent workflows Tollgate ships: AgentWorkflow,
// a multi-turn agent loop to read as an example; FallbackWorkflow, the child
// the interceptor starts to run an escalated call on its backup chain; and
// LLMActivityOptions, the activity options governed calls need.
package workflows
