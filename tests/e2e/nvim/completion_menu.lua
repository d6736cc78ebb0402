-- Drives Margin's completion-menu fallback (`completionMenu`) from a real headless Neovim through
-- Neovim's own `vim.lsp.completion`, as a user without inline completion has it: the documented
-- <C-Space> mapping to `vim.lsp.completion.get()`, keys typed to open the menu, select the item
-- (<C-n>) and accept it (<C-y>) — Neovim's own code puts the item in the buffer — then <Esc> and
-- `:write`. Environment: MARGIN_NVIM_FILE (the file to edit), MARGIN_NVIM_CURSOR ("line,col":
-- 1-based line, 0-based byte column where insert mode starts), MARGIN_NVIM_OUT (JSON results).

local H = dofile(vim.fs.dirname(debug.getinfo(1, "S").source:sub(2)) .. "/harness.lua")
local results, step = H.results, H.step
results.params, results.responses = {}, {}

-- Whatever goes wrong (the menu never shown, say), Neovim does not hang.
H.watchdog(100000)

local bufnr, client

-- Keys as typed by a person, run by Neovim's own command loop (remapped: <C-Space> is a mapping).
local function type_keys(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "m", false)
end

-- Back in normal mode: the server's copy is checked against the buffer, the buffer written.
local function after_insert_mode()
  results.mode_after = vim.api.nvim_get_mode().mode
  H.wait_answered(client, "textDocument/completion")
  H.record_server_copy(bufnr, client)
  vim.cmd.write()
  results.lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  results.stopped = H.stop(client)
  H.finish()
end

-- The item was accepted (<C-y>); Neovim's own CompleteDone handler (registered before this one
-- by `vim.lsp.completion.enable`) has run. Leave insert mode.
local function accepted()
  local item = vim.v.completed_item
  results.completed_word = item.word
  results.line_after_accept = vim.api.nvim_get_current_line()
  results.cursor_after_accept = vim.api.nvim_win_get_cursor(0)
  vim.api.nvim_create_autocmd("InsertLeave", {
    buffer = bufnr,
    once = true,
    callback = function() vim.schedule(step(after_insert_mode)) end,
  })
  type_keys("<Esc>")
end

-- The menu is shown: record what it offers, then select the first item and accept it.
local function menu_shown()
  results.pumvisible = vim.fn.pumvisible()
  local info = vim.fn.complete_info({ "items", "selected", "mode" })
  results.menu = {}
  for _, item in ipairs(info.items) do
    table.insert(results.menu, { word = item.word, abbr = item.abbr, menu = item.menu, kind = item.kind })
  end
  results.selected_before = info.selected
  results.complete_mode = info.mode
  results.line_with_menu = vim.api.nvim_get_current_line()
  vim.api.nvim_create_autocmd("CompleteDone", {
    buffer = bufnr,
    once = true,
    callback = function()
      results.complete_done_reason = vim.v.event.reason
      vim.schedule(step(accepted))
    end,
  })
  type_keys("<C-n><C-y>")
end

local function main()
  bufnr, client = H.attach({ completionMenu = true })
  results.supports = client:supports_method("textDocument/completion", bufnr)
  results.trigger_characters = vim.tbl_get(client.server_capabilities, "completionProvider", "triggerCharacters")
  -- What Neovim's module asks and what it gets, as sent and received.
  local request = client.request
  client.request = function(self, method, params, handler, ...)
    if method == "textDocument/completion" then
      table.insert(results.params, vim.deepcopy(params))
      local inner = handler
      handler = function(err, result, ...)
        table.insert(results.responses, { err = err, result = vim.deepcopy(result) })
        return inner(err, result, ...)
      end
    end
    return request(self, method, params, handler, ...)
  end

  -- The set-up of Neovim's docs for `vim.lsp.completion` (|lsp-autocompletion|, |lsp-completion|).
  vim.o.completeopt = "menuone,noselect,popup"
  vim.lsp.completion.enable(true, client.id, bufnr, { autotrigger = true })
  vim.keymap.set("i", "<C-Space>", function() vim.lsp.completion.get() end, { buffer = bufnr })

  -- Shown asynchronously, once Margin has answered: CompleteChanged fires when the menu opens.
  vim.api.nvim_create_autocmd("CompleteChanged", {
    buffer = bufnr,
    once = true,
    callback = function() vim.schedule(step(menu_shown)) end,
  })
  vim.api.nvim_create_autocmd("InsertEnter", {
    buffer = bufnr,
    once = true,
    callback = function() results.mode_in_insert = "i" end,
  })
  local line, col = assert(os.getenv("MARGIN_NVIM_CURSOR")):match("(%d+),(%d+)")
  vim.api.nvim_win_set_cursor(0, { tonumber(line), tonumber(col) })
  -- "i" inserts before the character under the cursor (the auto-closed bracket); <C-Space> asks.
  type_keys("i<C-Space>")
end

H.on_start(main)
