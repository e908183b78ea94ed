//! The MCP server behind `/mcp`: `tools/list` answers the reviewed list, `tools/call` runs
//! one tool as the agent the request authenticated ([`super::guard`]). A refusal is a tool
//! result with `isError: true` whose structured content is the REST problem and whose text
//! lists every error; only a tool that does not exist is a JSON-RPC error.

use super::schema::Pool;
use super::summary::refusal;
use super::tools::{Tool, call};
use crate::http::middleware::REQUEST_ID;
use crate::http::problem::{ApiError, Problem};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use std::sync::Arc;
use tauros_app::{Actor, App};

/// What a client is told when it connects, before any tool description.
pub(super) const INSTRUCTIONS: &str = "Tauros: you propose invoices, humans approve them. As this \
    agent you may read your customers, register and retire your payment destinations, and \
    create, revise, submit and withdraw your invoice proposals; preview_invoice checks a \
    proposal first and writes nothing. No tool approves, rejects, \
    requests changes or cancels: after submit_invoice, a human approver decides, which may take \
    minutes or days (check with get_invoice now and then, never in a loop). Money is \
    never a JSON number: send decimal strings such as \"1200.50\" (or integer minor units). \
    Ids: every invoice tool takes the invoice's `id`, never `current_revision.id`; an invoice's \
    `number` (INV-…) is given when it is issued, a revision's `number` counts revisions. \
    Every command is safe to retry: create_invoice_draft needs an idempotency_key, and a \
    repeated command answers `replayed: true` without doing anything twice. An answer is JSON \
    in structuredContent with a short text summary naming the ids and the next step. A refusal \
    is a tool result with isError true holding a problem that lists every mistake at once: \
    act on its `code`, `detail` and `errors`.";

/// The tool surface; one per request (cheap: the tool list is built once per router).
#[derive(Clone)]
pub(super) struct TaurosMcp {
    app: App,
    tools: Arc<[rmcp::model::Tool]>,
}

impl TaurosMcp {
    pub(super) fn new(app: App) -> TaurosMcp {
        let mut pool = Pool::new();
        let tools = Tool::ALL.map(|t| t.definition(&mut pool));
        TaurosMcp {
            app,
            tools: Arc::from(tools),
        }
    }
}

impl ServerHandler for TaurosMcp {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("tauros", env!("CARGO_PKG_VERSION")).with_title("Tauros"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = Tool::parse(&request.name) else {
            metrics::counter!("tauros_mcp_tool_calls_total", "tool" => "unknown", "outcome" => "unknown_tool")
                .increment(1);
            let names: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "no tool is named `{}`; the tools are {}. No tool approves, rejects, \
                     requests changes or cancels: humans decide",
                    tauros_domain::error::echo(&request.name),
                    names.join(", ")
                ),
                None,
            ));
        };
        let parts = context.extensions.get::<axum::http::request::Parts>();
        let request_id = parts
            .and_then(|p| p.headers.get(REQUEST_ID))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // The guard put the agent there; without it, nothing runs.
        let outcome = match parts.and_then(|p| p.extensions.get::<Actor>()) {
            Some(actor) => {
                let arguments = request.arguments.unwrap_or_default();
                call(&self.app, actor, tool, arguments).await
            }
            None => Err(tauros_app::AppError::Unauthorized.into()),
        };
        let result = match outcome {
            Ok(answer) => {
                metrics::counter!("tauros_mcp_tool_calls_total", "tool" => tool.name(), "outcome" => "ok")
                    .increment(1);
                let mut result = CallToolResult::success(vec![ContentBlock::text(answer.summary)]);
                result.structured_content = Some(answer.value);
                result
            }
            Err(error) => {
                metrics::counter!("tauros_mcp_tool_calls_total", "tool" => tool.name(), "outcome" => error.code())
                    .increment(1);
                tracing::info!(tool = tool.name(), code = error.code(), "tool refused");
                let problem = problem(&error, request_id);
                let mut result = CallToolResult::error(vec![ContentBlock::text(refusal(&problem))]);
                result.structured_content = serde_json::to_value(problem).ok();
                result
            }
        };
        Ok(result.into())
    }
}

fn problem(error: &ApiError, request_id: Option<String>) -> Problem {
    let mut problem = error.problem();
    problem.request_id = request_id;
    problem
}
