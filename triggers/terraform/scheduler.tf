# Cloud Scheduler sends one tick per schedule: published to the ticks topic, attribute task=NAME
# (tick_target = "pubsub"), or POSTed to /ticks/NAME with an OIDC token (tick_target = "http").
# Either way the service keys a tick by task and schedule slot, so a duplicated run is one run. A cron
# task registered with registry.tick(name, cron=..., timezone=...) gets the same schedule and zone.

resource "google_cloud_scheduler_job" "tick" {
  for_each    = var.tick_schedules
  name        = "${var.name}-${each.key}"
  description = "Tick for the ${each.key} task of ${var.name}"
  region      = var.region
  schedule    = each.value.schedule
  time_zone   = each.value.time_zone

  retry_config {
    retry_count = 3
  }

  dynamic "pubsub_target" {
    for_each = var.tick_target == "pubsub" ? [each.key] : []
    content {
      topic_name = google_pubsub_topic.events["ticks"].id
      data       = base64encode(jsonencode({ task = each.key }))
      attributes = {
        task = each.key
      }
    }
  }

  # POST /ticks/TASK with an ID token for local.tick_audience; the service keys the run by
  # X-CloudScheduler-ScheduleTime, so a retry of one run is the same slot.
  dynamic "http_target" {
    for_each = var.tick_target == "http" ? [each.key] : []
    content {
      http_method = "POST"
      uri         = "${local.tick_endpoint}/${each.key}"
      body        = base64encode(jsonencode({ task = each.key }))
      headers = {
        "Content-Type" = "application/json"
      }
      oidc_token {
        service_account_email = google_service_account.scheduler[0].email
        audience              = local.tick_audience
      }
    }
  }

  depends_on = [google_project_service.apis]
}

# The identity Cloud Scheduler signs HTTP ticks as (CONSUMER_TICK_HOOK_SERVICE_ACCOUNTS).
resource "google_service_account" "scheduler" {
  count        = var.tick_target == "http" ? 1 : 0
  account_id   = "${var.name}-ticks"
  display_name = "Cloud Scheduler tick identity of ${var.name}"
  depends_on   = [google_project_service.apis]
}
