;;; setup.el --- Margin started by eglot from client-emacs/margin.el's own entry  -*- lexical-binding: t; -*-
;; The set-up margin.el's commentary gives, without init.el: `margin-eglot-setup' puts
;; margin-lsp first in `eglot-server-programs' (eglot 1.9 has pylsp there for Python), and
;; `eglot-ensure' in python-mode's hook starts it for a Python file.
;; Environment: MARGIN_EMACS_FILE, MARGIN_EMACS_CLIENT (the folder of margin.el), MARGIN_EMACS_OUT.

(load (expand-file-name "harness.el" (file-name-directory load-file-name)) nil t)
(margin-h-watchdog 200)

(let (buffer)
  (margin-h-step "open"
    (setq buffer (margin-h-open
                  (getenv "MARGIN_EMACS_FILE")
                  (lambda ()
                    (add-to-list 'load-path (getenv "MARGIN_EMACS_CLIENT"))
                    (require 'margin)
                    (margin-h-put 'entry (format "%S" (margin-eglot-setup)))
                    (add-hook 'python-mode-hook #'eglot-ensure)))))
  (margin-h-step "server"
    (with-current-buffer buffer
      (let ((server (eglot-current-server)))
        (margin-h-put 'server_command (vconcat (process-command (jsonrpc--process server))))
        (margin-h-put 'managed_modes (vconcat (mapcar #'symbol-name (eglot--major-modes server))))
        (margin-h-put 'server_version (plist-get (margin-status) :version)))))
  (margin-h-step "stop"
    (with-current-buffer buffer
      (margin-h-put 'stopped (if (margin-h-stop) t :json-false))))
  (margin-h-finish))
;;; setup.el ends here
