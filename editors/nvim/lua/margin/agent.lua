-- Margin's agent in Neovim (0.11 and later): `:MarginAgent {task}` gives margin-lsp a task
-- (`margin/agent`, the current buffer as the active document; with a range, `:'<,'>MarginAgent`,
-- the selected lines) and shows each step as it streams in the `margin://agent` buffer, in a
-- split: one line per tool call (`step 1 · read calc.py → done`), what the model was told
-- instead of a call, each confirmation asked with its diff, the final answer and how the turn
-- stopped. `:MarginAgent! {task}` goes on in the last run's agent thread. `:MarginAgentStop`
-- cancels the run; the steps it completed stay in its thread.
--
-- Confirmations go through `vim.ui.select`, for Margin's client only: a command to run, or an
-- edit when the client does not advertise change annotations, comes as
-- `window/showMessageRequest` (Accept / Always in this thread / Reject, the diff in the
-- message); an edit marked `needsConfirmation` (Neovim 0.11+ advertises change annotations)
-- is asked as Accept / Reject with its diff before it is applied. An edit made for a version the
-- buffer has left is refused, never reported applied.
--
-- The problems Neovim shows from other sources (linters, other language servers; not Margin's
-- own) are forwarded as `margin/diagnostics` whenever they change, for the agent's
-- `diagnostics` tool.
--
-- Setup, with editors/nvim on the runtimepath (it holds lsp/margin.lua too):
--   require("margin.agent").setup({ height = 12 })
-- Then `:MarginAgent fix the failing test`, or `require("margin.agent").run(task, opts)`.
-- A run's end fires `User MarginAgentDone` with data `{ result?, error?, cancelled? }`.

local M = {}

M.config = { height = 12 }

local NAME = "margin://agent"
local scratch ---@type integer?
local log = {} ---@type string[]
local run ---@type { client_id: integer, id: integer, token: string, status?: string, final?: boolean }?
local runs = 0
local ours = setmetatable({}, { __mode = "k" }) -- the handlers this module installed

local function margin_client(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr, name = "margin" })[1]
end

-- The scratch buffer, made once.
local function buffer()
  if not (scratch and vim.api.nvim_buf_is_valid(scratch)) then
    scratch = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(scratch, NAME)
    vim.bo[scratch].bufhidden = "hide"
    vim.bo[scratch].modifiable = false
  end
  return scratch
end

--- The `margin://agent` buffer (nil before the first run).
function M.buffer()
  return scratch and vim.api.nvim_buf_is_valid(scratch) and scratch or nil
end

local function render()
  local buf = buffer()
  local lines = vim.list_extend({}, log)
  if run and run.status then table.insert(lines, run.status) end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    vim.api.nvim_win_set_cursor(win, { #lines, 0 })
  end
end

local function add(text, indent)
  for i, line in ipairs(vim.split(text, "\n", { plain = true })) do
    table.insert(log, (i > 1 and indent or "") .. line)
  end
  render()
end

-- What a call was about, as a person names it.
local function about(args)
  args = type(args) == "table" and args or {}
  local named = args.path or args.command or args.query or args.pointer
  if named ~= nil then return tostring(named) end
  return next(args) and vim.json.encode(args) or ""
end

local function first_line(text)
  return (tostring(text or ""):match("[^\n]*"))
end

local function ended(data)
  run = nil
  render()
  vim.api.nvim_exec_autocmds("User", { pattern = "MarginAgentDone", modeline = false, data = data })
end

local function on_event(value)
  local kind, step = value.kind, value.step or 0
  if kind == "step" then
    run.status = ("… step %d (%d prompt tokens)"):format(step, value.promptTokens or 0)
    render()
  elseif kind == "call" then
    add(("step %d · %s %s → %s"):format(step, value.tool, about(value.args), value.status))
  elseif kind == "told" then
    add(("step %d · told: %s — %s"):format(step, value.rejection or "", first_line(value.text)))
  elseif kind == "final" then
    run.final = true
    add("answer: " .. (value.answer or ""), "  ")
    add("stopped: " .. (value.stopped or ""))
  end
end

-- Asks with vim.ui.select from the coroutine a server request runs in; the choice, or nil.
local function choose(prompt, choices)
  local co = coroutine.running()
  if run then add("? " .. prompt, "  ") end
  vim.ui.select(choices, { prompt = prompt, kind = "margin.agent" }, function(choice)
    vim.schedule(function() coroutine.resume(co, choice) end)
  end)
  local choice = coroutine.yield()
  if run then add("  → " .. (choice or "no answer")) end
  return choice
end

local function in_coroutine()
  local co, main = coroutine.running()
  return co ~= nil and not main
end

local function on_message_request(err, params, ctx, default)
  local titles = vim.tbl_map(function(action) return action.title end, params.actions or {})
  if #titles == 0 or not in_coroutine() then return default(err, params, ctx) end
  local choice = choose(params.message, titles)
  for _, action in ipairs(params.actions) do
    if action.title == choice then return action end
  end
  return vim.NIL
end

-- The first document of `edit` whose buffer has moved past the version the edit was made for.
local function stale(edit)
  for _, change in ipairs(edit.documentChanges or {}) do
    local document = change.textDocument
    local version = document and document.version
    if type(version) == "number" then
      local bufnr = vim.uri_to_bufnr(document.uri)
      local now = vim.lsp.util.buf_versions[bufnr]
      if vim.api.nvim_buf_is_loaded(bufnr) and now and now > version then
        return ("%s changed since the edit was made (version %d, now %d)"):format(
          vim.fn.fnamemodify(vim.uri_to_fname(document.uri), ":t"), version, now)
      end
    end
  end
end

-- `edit` without its change annotations, as Neovim applies it with no question of its own.
local function plain(edit)
  edit = vim.deepcopy(edit)
  edit.changeAnnotations = nil
  for _, change in ipairs(edit.documentChanges or {}) do
    for _, text_edit in ipairs(change.edits or {}) do text_edit.annotationId = nil end
  end
  for _, text_edits in pairs(edit.changes or {}) do
    for _, text_edit in ipairs(text_edits) do text_edit.annotationId = nil end
  end
  return edit
end

-- What an annotated edit asks: its label, each document's name and unified diff.
local function proposal(edit, client)
  local label = "Margin"
  for _, annotation in pairs(edit.changeAnnotations or {}) do
    if annotation.needsConfirmation then label = annotation.label or label end
  end
  local parts = {}
  for _, change in ipairs(plain(edit).documentChanges or {}) do
    if change.edits then
      local bufnr = vim.uri_to_bufnr(change.textDocument.uri)
      vim.fn.bufload(bufnr)
      local before = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
      local copy = vim.api.nvim_create_buf(false, true)
      vim.api.nvim_buf_set_lines(copy, 0, -1, false, before)
      vim.lsp.util.apply_text_edits(change.edits, copy, client.offset_encoding)
      local after = vim.api.nvim_buf_get_lines(copy, 0, -1, false)
      vim.api.nvim_buf_delete(copy, { force = true })
      local fname = vim.uri_to_fname(change.textDocument.uri)
      local name = vim.fs.relpath and client.root_dir and vim.fs.relpath(client.root_dir, fname)
        or vim.fn.fnamemodify(fname, ":~:.")
      local diff = (vim.text and vim.text.diff or vim.diff)(table.concat(before, "\n") .. "\n",
                                                             table.concat(after, "\n") .. "\n", { ctxlen = 3 })
      table.insert(parts, ("%s asks to edit %s:\n--- a/%s\n+++ b/%s\n%s"):format(label, name, name, name,
                                                                           vim.trim(diff)))
    end
  end
  return #parts > 0 and table.concat(parts, "\n") or label .. " asks to apply an edit"
end

local function annotated(edit)
  for _, annotation in pairs(edit.changeAnnotations or {}) do
    if annotation.needsConfirmation then return true end
  end
  return false
end

local function on_apply_edit(err, params, ctx, default)
  local edit = params.edit or {}
  local moved = stale(edit)
  if moved then return { applied = false, failureReason = moved } end
  if not annotated(edit) or not in_coroutine() then return default(err, params, ctx) end
  local client = assert(vim.lsp.get_client_by_id(ctx.client_id))
  if choose(proposal(edit, client), { "Accept", "Reject" }) ~= "Accept" then
    return { applied = false, failureReason = "rejected" }
  end
  moved = stale(edit) -- the buffer may have changed while the person looked
  if moved then return { applied = false, failureReason = moved } end
  local ok, failure = pcall(vim.lsp.util.apply_workspace_edit, plain(edit), client.offset_encoding)
  return { applied = ok, failureReason = not ok and tostring(failure) or nil }
end

local function on_progress(err, params, ctx, default)
  local token = params and params.token
  if type(token) == "string" and token:find("^margin%-agent%-") then
    if run and run.token == token and run.client_id == ctx.client_id and type(params.value) == "table" then
      on_event(params.value)
    end
    return -- a stopped run's late events are dropped
  end
  return default(err, params, ctx)
end

-- `fn` as `client`'s handler of `method`, given the handler it replaces.
local function wrap(client, method, fn)
  if ours[client.handlers[method] or false] then return end
  local previous = client.handlers[method]
  local handler = function(err, params, ctx)
    return fn(err, params, ctx, previous or vim.lsp.handlers[method])
  end
  ours[handler] = true
  client.handlers[method] = handler
end

-- Converts a byte position of `bufnr` to an LSP position in `encoding`.
local function position(bufnr, row, col, encoding)
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
  return { line = row, character = vim.str_utfindex(line, encoding, math.min(col or 0, #line), false) }
end

--- The problems shown in `bufnr` from sources other than `client` (Margin), in LSP's shape.
function M.problems(bufnr, client)
  local own = { [vim.lsp.diagnostic.get_namespace(client.id)] = true,
                [vim.lsp.diagnostic.get_namespace(client.id, true)] = true }
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    if not own[d.namespace] then
      table.insert(found, {
        range = { start = position(bufnr, d.lnum, d.col, client.offset_encoding),
                  ["end"] = position(bufnr, d.end_lnum or d.lnum, d.end_col or d.col, client.offset_encoding) },
        severity = d.severity or vim.diagnostic.severity.ERROR,
        message = d.message,
        source = d.source,
      })
    end
  end
  return found
end

--- Sends `bufnr`'s problems to each Margin client attached to it (`margin/diagnostics`).
function M.forward(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) then return end
  for _, client in ipairs(vim.lsp.get_clients({ bufnr = bufnr, name = "margin" })) do
    client:notify("margin/diagnostics", { uri = vim.uri_from_bufnr(bufnr), diagnostics = M.problems(bufnr, client) })
  end
end

--- Margin's `client` answers the agent's questions through this module.
function M.attach(client)
  wrap(client, "$/progress", on_progress)
  wrap(client, "window/showMessageRequest", on_message_request)
  wrap(client, "workspace/applyEdit", on_apply_edit)
end

--- Whether a run is going on.
function M.running()
  return run ~= nil
end

--- Gives the agent `task`. `opts`: `bufnr` (default: the current buffer), `range` ({ first, last }
--- lines, 1-based: the selection), `thread_id` (go on in that agent thread), `read_only`. The
--- request's id, or nil when it was not sent.
function M.run(task, opts)
  opts = opts or {}
  local bufnr = (opts.bufnr == nil or opts.bufnr == 0) and vim.api.nvim_get_current_buf() or opts.bufnr
  local client = margin_client(bufnr)
  if not client then
    vim.notify("Margin's agent: margin-lsp is not attached to this buffer", vim.log.levels.ERROR)
    return nil
  end
  if run then
    vim.notify("Margin's agent is already working (:MarginAgentStop stops it)", vim.log.levels.WARN)
    return nil
  end
  M.attach(client)
  runs = runs + 1
  local token = ("margin-agent-%d"):format(runs)
  local params = { task = task, textDocument = { uri = vim.uri_from_bufnr(bufnr) }, partialResultToken = token,
                   threadId = opts.thread_id, readOnly = opts.read_only or nil }
  if opts.range then
    local last = vim.api.nvim_buf_get_lines(bufnr, opts.range[2] - 1, opts.range[2], false)[1] or ""
    params.selection = { start = { line = opts.range[1] - 1, character = 0 },
                         ["end"] = position(bufnr, opts.range[2] - 1, #last, client.offset_encoding) }
  end
  if bufnr == vim.api.nvim_get_current_buf() then
    params.position = vim.lsp.util.make_position_params(0, client.offset_encoding).position
  end
  log = { "Margin's agent: " .. task }
  local buf = buffer()
  if #vim.fn.win_findbuf(buf) == 0 then
    vim.api.nvim_open_win(buf, false, { split = "below", win = -1, height = M.config.height })
  end
  local this = { client_id = client.id, token = token, status = "… starting" }
  run = this
  render()
  local ok, id = client:request("margin/agent", params, function(err, result)
    if run ~= this then return end -- stopped already
    if err then
      add("error: " .. (err.message or tostring(err)), "  ")
    else
      if not this.final then
        add("answer: " .. (result.answer or ""), "  ")
        add("stopped: " .. (result.stopped or ""))
      end
      M.last_thread = result.threadId
      local steps, edits = #(result.steps or {}), #(result.edits or {})
      add(("thread %s · %d step%s · %d edit%s (:MarginAgent! goes on in it)"):format(
        result.threadId, steps, steps == 1 and "" or "s", edits, edits == 1 and "" or "s"))
    end
    ended({ result = result, error = err and (err.message or tostring(err)) or nil })
  end, bufnr)
  if not ok then
    run = nil
    add("error: the request was not sent (the client stopped)")
    return nil
  end
  this.id = id
  return id
end

--- Cancels the running request ($/cancelRequest); the steps it completed stay in its thread.
--- Whether one was running.
function M.stop()
  if not run then return false end
  local client = vim.lsp.get_client_by_id(run.client_id)
  if client and run.id then client:cancel_request(run.id) end
  add("stopped: cancelled (the steps done are kept in the agent thread)")
  ended({ cancelled = true })
  return true
end

--- `:MarginAgent[!] {task}` (a range: the selected lines; `!`: the last run's thread),
--- `:MarginAgentStop`, and the problems of Margin's buffers forwarded as they change.
function M.setup(opts)
  M.config = vim.tbl_extend("force", M.config, opts or {})
  vim.api.nvim_create_user_command("MarginAgent", function(args)
    M.run(args.args, { range = args.range > 0 and { args.line1, args.line2 } or nil,
                       thread_id = args.bang and M.last_thread or nil })
  end, { nargs = "+", range = true, bang = true, desc = "Margin: give the agent a task" })
  vim.api.nvim_create_user_command("MarginAgentStop", function() M.stop() end,
                                   { desc = "Margin: stop the agent's run" })
  local group = vim.api.nvim_create_augroup("margin.agent", { clear = true })
  vim.api.nvim_create_autocmd("LspAttach", {
    group = group,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if client and client.name == "margin" then
        M.attach(client)
        M.forward(args.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd("DiagnosticChanged", {
    group = group, callback = function(args) M.forward(args.buf) end,
  })
  for _, client in ipairs(vim.lsp.get_clients({ name = "margin" })) do
    M.attach(client)
    for bufnr in pairs(client.attached_buffers) do M.forward(bufnr) end
  end
end

return M
