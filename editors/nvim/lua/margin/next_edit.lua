-- Margin's next-edit suggestions in Neovim (0.11 and later): after a pause in typing, margin-lsp
-- is asked for the next edit (`margin/nextEdit`) at the cursor; the edit is shown where it goes
-- (the text it replaces marked, the lines as they would become below them); <Tab> jumps to it,
-- <Tab> again accepts it, <Esc> in normal mode dismisses it. A suggestion is dropped as soon as
-- the buffer changes, and applied only to the version it was made for.
--
-- An edit on the cursor's line, at or after the cursor, also comes as a plain inline completion
-- item: Neovim 0.12's `vim.lsp.inline_completion.enable()` shows it with no code of Margin's.
--
-- Setup, with editors/nvim on the runtimepath (it holds lsp/margin.lua too):
--   require("margin.next_edit").setup({ pause_ms = 500, keys = true })
-- and next edits turned on in Margin's settings: `nextEdit = { enabled = true, model = ... }`.

local M = {}

M.config = { pause_ms = 500, keys = true }

local ns = vim.api.nvim_create_namespace("margin.next_edit")
M.namespace = ns

---@type table<integer, { timer?: uv.uv_timer_t, shown?: table, client_id?: integer }>
local buffers = {}

local function margin_client(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr, name = "margin" })[1]
end

-- The byte column of an LSP position, in the client's position encoding.
local function byte_col(bufnr, position, encoding)
  local line = vim.api.nvim_buf_get_lines(bufnr, position.line, position.line + 1, false)[1] or ""
  return vim.str_byteindex(line, encoding, position.character, false)
end

--- Removes the suggestion shown in `bufnr`, if any.
function M.dismiss(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  if buffers[bufnr] then buffers[bufnr].shown = nil end
end

--- The suggestion shown in `bufnr`: `{ edits, jump_to, version }` (nil when none).
function M.shown(bufnr)
  local state = buffers[bufnr or vim.api.nvim_get_current_buf()]
  return state and state.shown
end

-- Shows `result` (margin/nextEdit's answer): each edit's old text marked, the lines it makes
-- below the last line it touches.
local function show(bufnr, client, result)
  M.dismiss(bufnr)
  if #result.edits == 0 or vim.lsp.util.buf_versions[bufnr] ~= result.version then return end
  local encoding = client.offset_encoding
  for _, edit in ipairs(result.edits) do
    local range = edit.range
    local start_col = byte_col(bufnr, range.start, encoding)
    local end_col = byte_col(bufnr, range["end"], encoding)
    if range.start.line ~= range["end"].line or start_col ~= end_col then
      vim.api.nvim_buf_set_extmark(bufnr, ns, range.start.line, start_col, {
        end_row = range["end"].line, end_col = end_col, hl_group = "DiffDelete",
      })
    end
    local first = vim.api.nvim_buf_get_lines(bufnr, range.start.line, range.start.line + 1, false)[1]
    local last = vim.api.nvim_buf_get_lines(bufnr, range["end"].line, range["end"].line + 1, false)[1]
    local made = first:sub(1, start_col) .. edit.newText .. last:sub(end_col + 1)
    local virt_lines = {}
    for _, line in ipairs(vim.split(made, "\n", { plain = true })) do
      table.insert(virt_lines, { { line, "DiffAdd" } })
    end
    vim.api.nvim_buf_set_extmark(bufnr, ns, range["end"].line, 0, { virt_lines = virt_lines })
  end
  buffers[bufnr].shown = { edits = result.edits, jump_to = result.jumpTo, version = result.version,
                           client_id = client.id }
end

--- Asks margin-lsp for the next edit at the cursor of the current window on `bufnr`.
function M.request(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local client = margin_client(bufnr)
  if not client or not buffers[bufnr] then return end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.textDocument.version = vim.lsp.util.buf_versions[bufnr]
  client:request("margin/nextEdit", params, function(err, result)
    if err == nil and result ~= nil and buffers[bufnr] then show(bufnr, client, result) end
  end, bufnr)
end

--- Accepts the suggestion shown in `bufnr`: its edits applied, if the buffer is still the
--- version they were made for. Whether it was applied.
function M.accept(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local shown = M.shown(bufnr)
  M.dismiss(bufnr)
  if not shown or vim.lsp.util.buf_versions[bufnr] ~= shown.version then return false end
  local client = vim.lsp.get_client_by_id(shown.client_id)
  if not client then return false end
  vim.lsp.util.apply_text_edits(shown.edits, bufnr, client.offset_encoding)
  return true
end

--- <Tab>: with a suggestion shown, jump to it (the cursor elsewhere) or accept it (the cursor
--- on its line). Whether it did either: false leaves the key to its usual meaning.
function M.tab()
  local bufnr = vim.api.nvim_get_current_buf()
  local shown = M.shown(bufnr)
  if not shown or vim.lsp.util.buf_versions[bufnr] ~= shown.version then
    M.dismiss(bufnr)
    return false
  end
  local client = vim.lsp.get_client_by_id(shown.client_id)
  local row = shown.jump_to.line
  if vim.api.nvim_win_get_cursor(0)[1] - 1 ~= row then
    local col = byte_col(bufnr, shown.jump_to, client and client.offset_encoding or "utf-16")
    vim.api.nvim_win_set_cursor(0, { row + 1, col })
    return true
  end
  return M.accept(bufnr)
end

local function restart_timer(bufnr)
  local state = buffers[bufnr]
  if not state then return end
  M.dismiss(bufnr)
  if not state.timer then state.timer = assert(vim.uv.new_timer()) end
  state.timer:stop()
  state.timer:start(M.config.pause_ms, 0, vim.schedule_wrap(function()
    if buffers[bufnr] and vim.api.nvim_get_current_buf() == bufnr then M.request(bufnr) end
  end))
end

--- Next edits for `bufnr` (a buffer margin-lsp is attached to).
function M.enable(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  if buffers[bufnr] then return end
  buffers[bufnr] = {}
  local group = vim.api.nvim_create_augroup("margin.next_edit." .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd({ "TextChanged", "TextChangedI" }, {
    group = group, buffer = bufnr, callback = function() restart_timer(bufnr) end,
  })
  vim.api.nvim_create_autocmd({ "BufUnload", "LspDetach" }, {
    group = group, buffer = bufnr, callback = function() M.disable(bufnr) end,
  })
  if M.config.keys then
    vim.keymap.set("n", "<Tab>", function()
      if not M.tab() then vim.api.nvim_feedkeys(vim.keycode("<Tab>"), "n", false) end
    end, { buffer = bufnr, desc = "Margin: jump to / accept the next edit" })
    vim.keymap.set("n", "<Esc>", function()
      M.dismiss(bufnr)
      vim.api.nvim_feedkeys(vim.keycode("<Esc>"), "n", false)
    end, { buffer = bufnr, desc = "Margin: dismiss the next edit" })
  end
end

--- No more next edits for `bufnr`.
function M.disable(bufnr)
  local state = buffers[bufnr]
  if not state then return end
  if state.timer then
    state.timer:stop()
    state.timer:close()
  end
  if vim.api.nvim_buf_is_valid(bufnr) then
    M.dismiss(bufnr)
    pcall(vim.api.nvim_del_augroup_by_name, "margin.next_edit." .. bufnr)
    if M.config.keys then
      pcall(vim.keymap.del, "n", "<Tab>", { buffer = bufnr })
      pcall(vim.keymap.del, "n", "<Esc>", { buffer = bufnr })
    end
  end
  buffers[bufnr] = nil
end

--- Next edits in every buffer margin-lsp attaches to.
function M.setup(opts)
  M.config = vim.tbl_extend("force", M.config, opts or {})
  vim.api.nvim_create_autocmd("LspAttach", {
    group = vim.api.nvim_create_augroup("margin.next_edit", { clear = true }),
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if client and client.name == "margin" then M.enable(args.buf) end
    end,
  })
end

return M
