-- What the headless-Neovim scripts share: results written as JSON to $MARGIN_NVIM_OUT however the
-- script ends, steps run protected, a watchdog so a script never hangs, Margin started on
-- $MARGIN_NVIM_FILE by its shipped config (editors/nvim/lsp/margin.lua), and the server's copy of the buffer read back before writing it.
-- Load with: local H = dofile(vim.fs.dirname(debug.getinfo(1, "S").source:sub(2)) .. "/harness.lua")

local H = { results = { nvim = tostring(vim.version()) } }
local out = assert(os.getenv("MARGIN_NVIM_OUT"))
local done = false

-- Writes the results and quits: with the error, exit code 1.
function H.finish(err)
  if done then return end
  done = true
  if err then H.results.error = tostring(err) end
  local handle = assert(io.open(out, "w"))
  handle:write(vim.json.encode(H.results))
  handle:close()
  vim.cmd(err and "cquit 1" or "qall!")
end

-- `fn`, run protected: any error ends Neovim with the error in the results.
function H.step(fn)
  return function(...)
    local ok, err = pcall(fn, ...)
    if not ok then H.finish(err) end
  end
end

-- Whatever goes wrong, Neovim does not hang: after `ms`, it ends with "timed out".
function H.watchdog(ms)
  vim.defer_fn(function() H.finish("timed out") end, ms)
end

-- `fn` once Neovim has started, protected; it calls H.finish itself when it is done (or, with
-- `finish_after`, when it returns).
function H.on_start(fn, finish_after)
  vim.api.nvim_create_autocmd("VimEnter", {
    once = true,
    callback = function()
      vim.schedule(H.step(function()
        fn()
        if finish_after then H.finish() end
      end))
    end,
  })
end

-- Margin's shipped config, as a user has it: editors/nvim ($MARGIN_NVIM_EDITORS) on the
-- runtimepath, so `vim.lsp.enable("margin")` finds its lsp/margin.lua, used as it is.
function H.use_shipped_config()
  local editors = assert(os.getenv("MARGIN_NVIM_EDITORS"))
  if not vim.tbl_contains(vim.opt.runtimepath:get(), editors) then
    vim.opt.runtimepath:append(editors)
  end
end

-- Where the client's config came from, into `results`: the lsp/margin.lua files on the
-- runtimepath, the command the client ran and the root it found.
function H.record_config(results, client)
  results.config_files = vim.api.nvim_get_runtime_file("lsp/margin.lua", true)
  results.client_cmd = client.config.cmd
  results.root_dir = client.config.root_dir or vim.NIL
end

-- Margin started for $MARGIN_NVIM_FILE with the shipped config (`init_options`, if any, layered
-- on top by `vim.lsp.config`, as a user sets them), opened; the buffer and the initialized client.
function H.attach(init_options)
  H.use_shipped_config()
  if init_options then
    vim.lsp.config("margin", { init_options = init_options })
  end
  vim.lsp.enable("margin")
  vim.cmd.edit(vim.fn.fnameescape(assert(os.getenv("MARGIN_NVIM_FILE"))))
  local bufnr, client = vim.api.nvim_get_current_buf(), nil
  assert(vim.wait(20000, function()
    client = vim.lsp.get_clients({ bufnr = bufnr, name = "margin" })[1]
    return client ~= nil and client.initialized
  end, 50), "margin-lsp did not start")
  H.record_config(H.results, client)
  return bufnr, client
end

-- Waits until no `method` request of `client` is pending.
function H.wait_answered(client, method)
  assert(vim.wait(15000, function()
    for _, request in pairs(client.requests) do
      if request.method == method then return false end
    end
    return true
  end, 20), "a " .. method .. " request is still pending")
end

-- The server's copy of the buffer (fingerprint, version) and the buffer's changedtick, into the
-- results: read before writing, since resetting 'modified' bumps the tick.
function H.record_server_copy(bufnr, client)
  local response = assert(vim.lsp.buf_request_sync(bufnr, "margin/status", {}, 15000))
  local status = assert(response[client.id], "no margin/status answer").result
  H.results.server_fingerprint = status.files[1].fingerprint
  H.results.server_version = status.files[1].version
  H.results.changedtick = vim.b[bufnr].changedtick
end

-- The end of a script that edited the buffer: every `method` request answered, the server's copy
-- recorded, the buffer written and its lines recorded, the client stopped; then H.finish.
function H.write_and_finish(bufnr, client, method)
  H.wait_answered(client, method)
  H.record_server_copy(bufnr, client)
  vim.cmd.write()
  H.results.lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  H.results.stopped = H.stop(client)
  H.finish()
end

-- Stops the client and waits for it; whether it stopped.
function H.stop(client)
  client:stop()
  return vim.wait(10000, function() return client:is_stopped() end, 50)
end

return H
