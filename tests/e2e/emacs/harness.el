;;; harness.el --- what the headless-Emacs scripts share  -*- lexical-binding: t; -*-
;; Results written as JSON to $MARGIN_EMACS_OUT however the script ends, steps run protected,
;; a watchdog so a script never hangs, waits on conditions (never fixed sleeps), Margin started
;; by eglot on $MARGIN_EMACS_FILE through the README's set-up (init.el beside this file), and
;; the server's copy of the buffer read back with `margin/status'.
;; Load with: (load (expand-file-name "harness.el" (file-name-directory load-file-name)))

(require 'cl-lib)
(require 'json)
(require 'eglot)

(defvar margin-h-dir (file-name-directory load-file-name) "This folder.")
(defvar margin-h-results nil "The results so far: an alist, newest first.")
(defvar margin-h--out (or (getenv "MARGIN_EMACS_OUT") (error "MARGIN_EMACS_OUT is not set")))
(defvar margin-h--done nil)
(defvar margin-h--step nil "The step running now, named in an error.")

(defun margin-h-put (key value)
  "Record VALUE under KEY (a symbol) in the results."
  (setq margin-h-results (cons (cons key value) (assq-delete-all key margin-h-results))))

(defun margin-h-get (key) (alist-get key margin-h-results))

(defun margin-h-finish (&optional err)
  "Write the results and quit Emacs: with ERR, the error is in the results and the exit code is 1."
  (unless margin-h--done
    (setq margin-h--done t)
    (when err (margin-h-put 'error (format "%s%s" (if margin-h--step (format "%s: " margin-h--step) "") err)))
    (let ((coding-system-for-write 'utf-8-unix))
      (with-temp-file margin-h--out
        (insert (json-encode (reverse margin-h-results)))))
    (kill-emacs (if err 1 0))))

(defmacro margin-h-step (name &rest body)
  "Run BODY as the step NAME: any error ends Emacs with the error, named, in the results."
  (declare (indent 1))
  `(progn
     (setq margin-h--step ,name)
     (condition-case err
         (prog1 (progn ,@body) (setq margin-h--step nil))
       ((debug error quit) (margin-h-finish (error-message-string err))))))

(defun margin-h-watchdog (seconds)
  "Whatever goes wrong, Emacs does not hang: after SECONDS, it ends with \"timed out\"."
  (run-at-time seconds nil (lambda () (margin-h-finish "timed out (watchdog)"))))

(defun margin-h-wait (what predicate &optional seconds)
  "Wait until PREDICATE holds, handling the server's messages meanwhile (timers run too); an
error naming WHAT if it has not held within SECONDS (default 60)."
  (let ((deadline (+ (float-time) (or seconds 60))))
    (while (not (funcall predicate))
      (when (> (float-time) deadline)
        (error "Timed out waiting for %s" what))
      (accept-process-output nil 0.05))))

(defun margin-h-fingerprint (&optional buffer)
  "Margin's fingerprint of BUFFER's text: sha256 of its UTF-8 bytes."
  (with-current-buffer (or buffer (current-buffer))
    (save-restriction
      (widen)
      (concat "sha256:" (secure-hash 'sha256 (encode-coding-string
                                              (buffer-substring-no-properties (point-min) (point-max))
                                              'utf-8-unix t))))))

(defun margin-h-flush ()
  "Tell the server about the buffer's edits now (batch Emacs runs no idle timers)."
  (eglot--signal-textDocument/didChange))

(defun margin-h-open (file &optional setup)
  "Visit FILE with the set-up of init.el (the README's), or the function SETUP's, as a person
would: the major mode's hook calls `eglot-ensure', which connects after the command; the
buffer, once eglot manages it and the server is initialized."
  (if setup (funcall setup) (load (expand-file-name "init.el" margin-h-dir) nil t))
  ;; A loaded machine may start margin-lsp slowly: give the handshake time (eglot: 30 s).
  (setq eglot-connect-timeout 120)
  (let ((buffer (find-file-noselect file)))
    (set-buffer buffer)
    ;; What the command loop does after `find-file': the hook eglot-ensure added runs.
    (run-hooks 'post-command-hook)
    (margin-h-wait "eglot to manage the buffer"
                   (lambda () (and (buffer-local-value 'eglot--managed-mode buffer)
                                   (with-current-buffer buffer (eglot-current-server))))
                   150)
    (margin-h-put 'encoding_offered
                  (let ((general (plist-get (eglot-client-capabilities (eglot-current-server)) :general)))
                    (or (plist-get general :positionEncodings) "none")))
    buffer))

(defun margin-h-status ()
  "`margin/status' of this buffer's server, after sending the buffer's latest edits."
  (margin-h-flush)
  (jsonrpc-request (eglot-current-server) :margin/status eglot--{} :timeout 60))

(defun margin-h-server-copy (&optional buffer)
  "The server's copy of BUFFER's file: a plist (:uri :version :fingerprint ...)."
  (with-current-buffer (or buffer (current-buffer))
    (let ((uri (plist-get (eglot--TextDocumentIdentifier) :uri)))
      (or (cl-find uri (plist-get (margin-h-status) :files)
                   :key (lambda (file) (plist-get file :uri)) :test #'equal)
          (error "margin/status does not list %s" uri)))))

(defun margin-h-record-copy (label &optional buffer)
  "Record under LABEL the server's copy of BUFFER against the buffer itself."
  (with-current-buffer (or buffer (current-buffer))
    (let ((copy (margin-h-server-copy)))
      (margin-h-put label
                    (list :server_version (plist-get copy :version)
                          :server_fingerprint (plist-get copy :fingerprint)
                          :buffer_version eglot--versioned-identifier
                          :buffer_fingerprint (margin-h-fingerprint)
                          :text (buffer-substring-no-properties (point-min) (point-max)))))))

(defun margin-h-stop ()
  "Shut the server down as eglot does; whether its process is gone."
  (let ((server (eglot-current-server)))
    (eglot-shutdown server)
    (not (jsonrpc-running-p server))))

(provide 'harness)
;;; harness.el ends here
