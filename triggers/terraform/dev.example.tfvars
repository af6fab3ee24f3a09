# The dev environment; the same values as k8s/overlays/dev (checked by tests/deploy_artifacts).
# cp dev.example.tfvars dev.tfvars, replace the example values, then
# terraform apply -var-file=dev.tfvars
project_id    = "acme-consumer-dev"
region        = "europe-west1"
push_endpoint = "https://consumer-dev.acme.example/push"
bucket_name   = "acme-consumer-dev-uploads"
k8s_namespace = "consumer-dev"
