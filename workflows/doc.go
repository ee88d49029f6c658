// Package workflows holds the agent workflows Tollgate ships: AgentWorkflow,
// a tool-using agent loop to read as an example; FallbackWorkflow, the child
// the interceptor starts to run an escalated call on its backup chain; and
// LLMActivityOptions and ToolActivityOptions, the activity options its
// governed calls and its tools need.
package workflows
