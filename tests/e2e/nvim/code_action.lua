-- Drives a Margin code action from a real headless Neovim: select lines in visual mode, ask
-- for code actions on the selection, choose Margin's, let Neovim resolve and apply it, write
-- the buffer. Environment: MARGIN_NVIM_FILE (the file to edit), MARGIN_NVIM_TITLE (the action
-- to choose), MARGIN_NVIM_LINES ("first,last", 1-based), MARGIN_NVIM_OUT (JSON results).

local H = dofile(vim.fs.dirname(debug.getinfo(1, "S").source:sub(2)) .. "/harness.lua")
local results = H.results

local function main()
  local bufnr, client = H.attach()

  -- Select whole lines (V), as a person does; the marks '< and '> hold the selection after it.
  local first, last = assert(os.getenv("MARGIN_NVIM_LINES")):match("(%d+),(%d+)")
  vim.cmd("normal! " .. first .. "GV" .. last .. "G\27")
  results.offered = {}
  local before = vim.b[bufnr].changedtick
  local wanted = assert(os.getenv("MARGIN_NVIM_TITLE"))
  vim.lsp.buf.code_action({
    range = { start = vim.api.nvim_buf_get_mark(bufnr, "<"), ["end"] = vim.api.nvim_buf_get_mark(bufnr, ">") },
    filter = function(action)
      table.insert(results.offered, action.title)
      return action.title == wanted
    end,
    apply = true,
  })
  results.applied = vim.wait(30000, function() return vim.b[bufnr].changedtick ~= before end, 50)
  H.record_server_copy(bufnr, client)  -- the server's copy against the buffer
  vim.cmd.write()
  results.fileformat = vim.bo[bufnr].fileformat
  H.stop(client)
end

H.on_start(main, true)
