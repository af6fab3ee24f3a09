variable "project_id" {
  description = "The Google Cloud project that runs the consumer and its triggers."
  type        = string
}

variable "region" {
  description = "Region of the Cloud Scheduler jobs (and of the bucket, when created here)."
  type        = string
  default     = "europe-west1"
}

variable "name" {
  description = "Prefix of every resource name (topics, subscriptions, jobs, service accounts)."
  type        = string
  default     = "consumer"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{3,20}$", var.name))
    error_message = "name: 4-21 lowercase letters, digits or hyphens, starting with a letter (service account ids are limited to 30 characters)."
  }
}

variable "push_endpoint" {
  description = "The public HTTPS URL of the service's /push route (the Ingress host)."
  type        = string

  validation {
    condition     = can(regex("^https://[^/]+/push$", var.push_endpoint))
    error_message = "push_endpoint must be https://HOST/push: Pub/Sub pushes only to HTTPS."
  }
}

variable "push_audience" {
  description = "OIDC audience of the push tokens; empty means the push endpoint. The service's CONSUMER_PUSH_AUDIENCE must be this value."
  type        = string
  default     = ""
}

variable "ack_deadline_seconds" {
  description = "Ack deadline of the push subscriptions, which for push is also the request timeout. Must equal CONSUMER_ACK_DEADLINE_SECONDS (the handler budget is this less CONSUMER_SAFETY_MARGIN_SECONDS)."
  type        = number
  default     = 60

  validation {
    condition     = var.ack_deadline_seconds >= 10 && var.ack_deadline_seconds <= 600
    error_message = "ack_deadline_seconds must be 10..600 (Pub/Sub's range)."
  }
}

variable "max_delivery_attempts" {
  description = "Deliveries before a message is dead-lettered. Above CONSUMER_MAX_ATTEMPTS, so the service records a failing event dead in its inbox (replayable from the CLI) before Pub/Sub gives up on it."
  type        = number
  default     = 10

  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100
    error_message = "max_delivery_attempts must be 5..100 (Pub/Sub's range)."
  }
}

variable "retry_minimum_backoff" {
  description = "Shortest wait before a nacked message is redelivered."
  type        = string
  default     = "10s"
}

variable "retry_maximum_backoff" {
  description = "Longest wait before a nacked message is redelivered (at most 600s)."
  type        = string
  default     = "600s"
}

variable "message_retention_duration" {
  description = "How long an undelivered message is kept (a week: outlives a long outage)."
  type        = string
  default     = "604800s"
}

variable "tick_schedules" {
  description = "Cloud Scheduler jobs, task name => unix-cron schedule and its IANA time zone. Each publishes to the ticks topic with attribute task=NAME. Every run must land in its own slot of the task's registered schedule, and no slot may be left without a run (tests/deploy_artifacts/test_consistency.py checks both)."
  type = map(object({
    schedule  = string
    time_zone = optional(string, "Etc/UTC")
  }))
  default = {
    sweep   = { schedule = "*/5 * * * *", time_zone = "Etc/UTC" }
    cleanup = { schedule = "17 3 * * *", time_zone = "Etc/UTC" }
  }
}

variable "tick_target" {
  description = "How Cloud Scheduler delivers ticks: \"pubsub\" (publish to the ticks topic; the slot is the publishTime) or \"http\" (POST /ticks/TASK next to push_endpoint with an OIDC token for its URL; the slot is the job's schedule time). With \"http\", set CONSUMER_TICK_HOOK_AUDIENCE and CONSUMER_TICK_HOOK_SERVICE_ACCOUNTS from the consumer_config output."
  type        = string
  default     = "pubsub"

  validation {
    condition     = contains(["pubsub", "http"], var.tick_target)
    error_message = "tick_target must be \"pubsub\" or \"http\"."
  }
}

variable "create_bucket" {
  description = "Create the uploads bucket here; false to attach the notification to an existing bucket."
  type        = bool
  default     = true
}

variable "bucket_name" {
  description = "The bucket whose new objects (under notification_prefix) are processed."
  type        = string
}

variable "notification_prefix" {
  description = "Only objects whose names start with this prefix are announced."
  type        = string
  default     = "incoming/"
}

variable "k8s_namespace" {
  description = "Namespace of the consumer's Kubernetes service account (Workload Identity)."
  type        = string
  default     = "consumer"
}

variable "k8s_service_account" {
  description = "Name of the consumer's Kubernetes service account (k8s/base/serviceaccount.yaml)."
  type        = string
  default     = "consumer"
}

variable "deploy_publishers" {
  description = "Principals allowed to publish deploy messages, e.g. your CI's service account (\"serviceAccount:ci@PROJECT.iam.gserviceaccount.com\")."
  type        = list(string)
  default     = []
}

variable "job_publishers" {
  description = "Principals allowed to publish jobs on the jobs topic, e.g. \"serviceAccount:shop@PROJECT.iam.gserviceaccount.com\"."
  type        = list(string)
  default     = []
}

variable "uptime_check_period" {
  description = "How often Cloud Monitoring probes the push endpoint from each region."
  type        = string
  default     = "60s"

  validation {
    condition     = contains(["60s", "300s", "600s", "900s"], var.uptime_check_period)
    error_message = "uptime_check_period must be 60s, 300s, 600s or 900s (Cloud Monitoring's choices)."
  }
}

variable "uptime_alert_after_seconds" {
  description = "How long the probes must fail (in more than one region) before the alert fires."
  type        = number
  default     = 120

  validation {
    condition     = var.uptime_alert_after_seconds >= 0 && var.uptime_alert_after_seconds <= 86400
    error_message = "uptime_alert_after_seconds must be 0..86400."
  }
}

variable "alert_notification_channels" {
  description = "Notification channel ids (projects/P/notificationChannels/N) the uptime alert is sent to; empty: the alert shows in the console only."
  type        = list(string)
  default     = []
}

variable "cloud_trace" {
  description = "The pods export spans to Cloud Trace (CONSUMER_TRACES_EXPORTER=gcp): enable the API and let the workload write traces (roles/cloudtrace.agent)."
  type        = bool
  default     = false
}
